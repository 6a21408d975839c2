package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/nemesis"
	"github.com/lockpick-dev/lockpick/results"
	"github.com/lockpick-dev/lockpick/scenarios"
)

func newRunCmd() *cobra.Command {
	cfg := harness.Config{}
	var junit *string
	var seedList string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "run [SCENARIO.yaml]",
		Short: "Run a lock under nemeses and check the history",
		Long: `run starts a cluster, drives the clients through the lock while the nemeses inject faults,
and checks the history. It exits 0 valid, 1 invalid, 2 unknown, 255 when the run could not start.

Given a scenario file, run takes everything from the file (only ` + fileFlagList() + `
may change it) and exits 0 when the run showed what the file expects, 1 when it did not.`,
		Example: `  lockpick run --lock redlock --nemesis restart --time-limit 60s --seed 1
  lockpick run --lock redlock --nemesis partition:kind=client-minority,clock:target=majority
  lockpick run scenarios/redlock-restart.yaml --seed 3`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return runFile(cmd, args[0], cfg)
			}
			if cfg.Nemesis == "help" {
				fmt.Fprint(cmd.OutOrStdout(), nemesis.Describe())
				return nil
			}
			if !cmd.Flags().Changed("seed") {
				cfg.Seed = randomSeed()
			}
			stampConfig(&cfg)
			cfg.Command = cmdLine()
			if dryRun {
				text, err := harness.DryRun(cfg)
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), text)
				return nil
			}
			if cmd.Flags().Changed("seeds") {
				return runSeeds(cmd, cfg, seedList, *junit)
			}
			return runOnce(cmd, cfg, *junit)
		},
	}
	f := cmd.Flags()
	optionFlags(f, "run", &cfg)
	seedsFlag(f, &seedList, "", "run once per seed of this list and summarise the runs")
	junit = junitFlag(cmd, "run")
	f.BoolVar(&dryRun, "dry-run", false, "print what the run would do (nodes, keys, the faults' schedule, the clean-up) and exit without starting anything")
	return cmd
}

// runFile runs a scenario file; only flags that do not change what it tests may be given with it.
func runFile(cmd *cobra.Command, file string, set harness.Config) error {
	if err := refuseWithFile(cmd.Flags(), file); err != nil {
		return err
	}
	s, err := scenarios.Load(file)
	if err != nil {
		return err
	}
	o := overridesFrom(cmd.Flags(), set)
	junitPath, _ := cmd.Flags().GetString("junit")
	o.junit = newJUnit(junitPath, "lockpick run")
	if cmd.Flags().Changed("seeds") {
		return runFileSeeds(cmd, s, o)
	}
	met, err := runScenario(cmd, cmd.OutOrStdout(), progressWriter(), s, o)
	if jerr := o.junit.write(); jerr != nil && err == nil {
		err = jerr
	}
	if err != nil {
		return err
	}
	if !met {
		return exitError{1}
	}
	return nil
}

func cmdLine() []string { return os.Args }

// runOnce runs cfg and says its verdict the moment it is checked, before any file is written from
// it; files that then cannot be written (a full disk, --junit) are warnings, and the exit code is
// the verdict's.
func runOnce(cmd *cobra.Command, cfg harness.Config, junitPath string) error {
	w := cmd.OutOrStdout()
	j := newJUnit(junitPath, "lockpick run")
	began := time.Now()
	out, err := harness.RunAnnounced(cmd.Context(), cfg, progressWriter(), func(out *harness.Outcome) {
		fmt.Fprint(w, out.Result.Summary())
		printOutcome(w, out)
	})
	j.addRun(cfg, out, err, time.Since(began))
	jerr := j.write()
	if err != nil {
		return err
	}
	if jerr != nil {
		out.Unwritten = append(out.Unwritten, jerr.Error())
	}
	fmt.Fprintf(w, "seed %d; run stored in %s\n", cfg.Seed, out.Dir)
	if !printUnwritten(cmd.ErrOrStderr(), out.Unwritten) {
		fmt.Fprintf(w, "report: %s, %s, %s\n",
			filepath.Join(out.Dir, results.ReportFile), filepath.Join(out.Dir, results.SummaryFile), filepath.Join(out.Dir, results.ResultsFile))
	}
	return exitError{runExitCode(out)}
}

// printUnwritten warns of each file a run could not write after its verdict was said, and reports
// whether there was any.
func printUnwritten(w io.Writer, unwritten []string) bool {
	for _, u := range unwritten {
		fmt.Fprintf(w, "lockpick: warning: %s (the verdict above stands)\n", u)
	}
	return len(unwritten) > 0
}

// printOutcome says what the harness saw beside the verdict: the library the run tested, run
// errors, overload warnings, and how much of the plan a run cut short had run.
func printOutcome(w io.Writer, out *harness.Outcome) {
	if l := out.Library; l != nil {
		fmt.Fprintln(w, "library:", l.String())
		for _, n := range l.Notes {
			fmt.Fprintln(w, "library note:", n)
		}
	}
	for _, e := range out.Errors {
		fmt.Fprintln(w, "run error:", e)
	}
	for _, e := range out.Warnings {
		fmt.Fprintln(w, "warning:", e)
	}
	for _, e := range out.Notes {
		fmt.Fprintln(w, "note:", e)
	}
	for _, u := range out.Unwritten {
		fmt.Fprintf(w, "warning: %s (the verdict above stands)\n", u)
	}
	if out.StoppedEarly != "" {
		fmt.Fprintf(w, "stopped early (--stop-at-first): %s\n", out.StoppedEarly)
	}
	switch {
	case out.Stopped != "":
		fmt.Fprintf(w, "cut short: %s; the verdict covers only the history recorded until then, and a run cut short never passes as valid\n", out.Stopped)
	case out.Interrupted:
		fmt.Fprintln(w, "interrupted after the plan had run: the verdict covers the whole run")
	}
}

// runExitCode is the run's exit code. A run cut short proved nothing about the part of its plan it did
// not run, so it never exits 0 (valid): the checker calls it unknown, and this guard keeps that
// promise even for a checker that does not know the run's completion.
func runExitCode(out *harness.Outcome) int {
	code := out.Result.Valid.ExitCode()
	if out.Stopped != "" && code == 0 {
		return 2
	}
	return code
}

// randomSeed picks a seed for a run that was given none; it is printed and stored with the run.
func randomSeed() uint64 { return rand.Uint64() >> 1 }

// progressWriter is stderr when it is a terminal, for the live progress line; nil otherwise.
func progressWriter() io.Writer {
	if isTerminal(os.Stderr) {
		return os.Stderr
	}
	return nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
