package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/results"
	"github.com/lockpick-dev/lockpick/scenarios"
	"github.com/lockpick-dev/lockpick/systems"
)

// scenarioOverrides are the flags that may change a scenario file's run without changing what it
// tests.
type scenarioOverrides struct {
	seed      *uint64 // nil: the file's seed
	timeLimit time.Duration
	store     string
	junit     *junitReport // nil without --junit
	// stopAtFirst ends the fault phase at the first violation, for scenarios whose expectation a
	// violation alone settles (invalid, with violations and no other finding asked for).
	stopAtFirst bool
	// etcdServer is the etcd program of scenarios on the etcd system (--etcd-server).
	etcdServer string
	// backend and dockerHost run the scenario's nodes elsewhere (--backend, --docker-host): the
	// file's nodes, lock and faults stay what they are.
	backend, dockerHost string
	// dockerPublish is where a remote Engine's published ports are reached (--docker-publish-host).
	dockerPublish string
	// ssh holds the ssh backend's options given (--hosts, --ssh-*).
	ssh harness.Config
}

// apply sets the backend overrides on a scenario's configuration.
func (o scenarioOverrides) applyBackend(cfg *harness.Config) {
	if o.backend != "" {
		cfg.Backend = o.backend
	}
	if o.dockerHost != "" {
		cfg.DockerHost = o.dockerHost
	}
	if o.dockerPublish != "" {
		cfg.DockerPublishHost = o.dockerPublish
	}
	cfg.OverrideSSH(o.ssh)
}

// overridesFrom reads the flags that may change a scenario file's run from set, the Config they
// are bound to (fileOptionFlags, or run's own options).
func overridesFrom(f *pflag.FlagSet, set harness.Config) scenarioOverrides {
	o := scenarioOverrides{store: set.Store, stopAtFirst: set.StopAtFirst}
	// Only what was given overrides: a file may name its own backend.
	given := func(name, v string) string {
		if f.Changed(name) {
			return v
		}
		return ""
	}
	o.etcdServer, o.backend = given("etcd-server", set.EtcdServer), given("backend", set.Backend)
	o.dockerHost, o.dockerPublish = given("docker-host", set.DockerHost), given("docker-publish-host", set.DockerPublishHost)
	o.ssh = harness.Config{SSHHosts: set.SSHHosts, SSHUser: set.SSHUser, SSHKey: set.SSHKey, SSHKnownHosts: set.SSHKnownHosts, SSHFingerprints: set.SSHFingerprints,
		AllowHostClock: set.AllowHostClock}
	if f.Changed("seed") {
		o.seed = &set.Seed
	}
	if f.Changed("time-limit") {
		o.timeLimit = time.Duration(set.TimeLimit)
	}
	return o
}

// settledByAViolation reports whether one violation settles e: an invalid verdict whose only
// findings asked for are violations.
func settledByAViolation(e scenarios.Expectation) bool {
	if e.Verdict != checker.Invalid || slices.Contains(e.None, "violations") {
		return false
	}
	for _, n := range e.Some {
		if n != "violations" {
			return false
		}
	}
	return true
}

// config is scenario s's run with the overrides applied.
func (o scenarioOverrides) config(s scenarios.Scenario) harness.Config {
	cfg := s.Config
	cfg.Name, cfg.Command = s.Name, cmdLine()
	stampConfig(&cfg)
	if o.store != "" {
		cfg.Store = o.store
	}
	if o.seed != nil {
		cfg.Seed = *o.seed
	}
	if o.timeLimit > 0 {
		cfg.TimeLimit = harness.Duration(o.timeLimit)
	}
	// --etcd-server applies to the scenarios on the etcd system; the others have no etcd to choose.
	if needs, err := locks.NeedsOf(cfg.Lock); err == nil && needs.System == "etcd" && o.etcdServer != "" {
		cfg.EtcdServer = o.etcdServer
	}
	o.applyBackend(&cfg)
	if o.stopAtFirst && settledByAViolation(s.Expect) {
		cfg.StopAtFirst = true
	}
	return cfg
}

// earlyStopLength is about how long a scenario that stops at its first violation runs: the
// violation comes with one of the first faults, then the recovery (measured: 5 to 25 s).
const earlyStopLength = 15 * time.Second

// expectedLength is how long s's run is likely to take: its plan, or for a run that stops at its
// first violation, earlyStopLength at most.
func (o scenarioOverrides) expectedLength(s scenarios.Scenario) time.Duration {
	cfg := o.config(s)
	plan := time.Duration(cfg.TimeLimit + cfg.Recovery)
	if cfg.StopAtFirst {
		return min(plan, earlyStopLength)
	}
	return plan
}

// missed says how a run of s differed from what s expects; empty when it met it.
func missed(s scenarios.Scenario, out *harness.Outcome) []string {
	miss := s.Expect.Met(out.Result)
	if out.Stopped != "" {
		miss = append(miss, out.Stopped)
	}
	return miss
}

// runScenario runs one scenario, reports on w (the progress line, if any, goes to progress), and says
// whether it showed what it expects.
func runScenario(cmd *cobra.Command, w, progress io.Writer, s scenarios.Scenario, o scenarioOverrides) (met bool, err error) {
	cfg := o.config(s)
	seed := fmt.Sprintf("seed %d", cfg.Seed)
	if s.RandomSeed && o.seed == nil {
		seed = fmt.Sprintf("seed %d (drawn at random: the file gives none; rerun it with --seed %d)", cfg.Seed, cfg.Seed)
	}
	fmt.Fprintf(w, "== %s: %s\n   %s, %s, expect %s\n", s.Name, s.Why, s.File, seed, s.Expect)
	began := time.Now()
	out, err := harness.Run(cmd.Context(), cfg, progress)
	if err != nil {
		o.junit.add(results.ErrorCase("lockpick.scenario", s.Name, err, time.Since(began)))
		return false, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	fmt.Fprint(w, out.Result.Summary())
	printOutcome(w, out)
	miss := missed(s, out)
	o.junit.add(results.ScenarioCase(s.Name, s.Expect.String(), out.Dir, out.Result, miss, time.Since(began)))
	if len(miss) == 0 {
		fmt.Fprintf(w, "== %s: expected %s: met (%s)\n\n", s.Name, s.Expect, out.Dir)
		return true, nil
	}
	fmt.Fprintf(w, "== %s: expected %s: NOT MET: %s (%s)\n\n", s.Name, s.Expect, strings.Join(miss, "; "), out.Dir)
	return false, nil
}

func newScenarioCmd() *cobra.Command {
	var list bool
	var set harness.Config
	var junit *string
	var parallel int
	cmd := &cobra.Command{
		Use:   "scenario [NAME|FILE.yaml...]",
		Short: "Run scenarios and compare each outcome with the expected one",
		Long: `scenario runs each named scenario (all built-in ones when none is named) and exits 0 when
every outcome is the expected one, 1 when any differs, 255 when a run could not start or crashed.
The built-in scenarios are the repository's scenarios/*.yaml; a FILE.yaml is read from disk.`,
		Example: "  lockpick scenario redlock-restart --seed 3\n  lockpick scenario scenarios/redlock-clock-forward-majority.yaml\n  lockpick scenario --list",
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			var chosen []scenarios.Scenario
			if len(args) == 0 {
				all, err := scenarios.All()
				if err != nil {
					return err
				}
				// Run without names on another backend, the scenarios whose system it cannot run are
				// left out, and said so: the subset that backend can run.
				chosen = onBackend(w, all, overridesFrom(cmd.Flags(), set))
			}
			for _, name := range args {
				s, err := scenarios.Find(name)
				if err != nil {
					return err
				}
				chosen = append(chosen, s)
			}
			if parallel < 1 {
				return fmt.Errorf("--parallel must be at least 1, got %d", parallel)
			}
			if list {
				for _, s := range chosen {
					fmt.Fprintf(w, "%-34s %-7s %-5s expect %-28s %s\n", s.Name, s.Config.Lock, time.Duration(s.Config.TimeLimit), s.Expect, s.Why)
				}
				return nil
			}
			o := overridesFrom(cmd.Flags(), set)
			o.junit = newJUnit(*junit, "lockpick scenario")
			start := time.Now()
			failed, ran, err := runScenarios(cmd, chosen, o, parallel)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%d scenarios in %v: %d met, %d not met %s\n", ran, time.Since(start).Round(time.Second),
				ran-len(failed), len(failed), strings.Join(failed, " "))
			if len(failed) > 0 {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&list, "list", false, "list the scenarios and their expectations")
	fileOptionFlags(cmd.Flags(), &set)
	cmd.Flags().IntVar(&parallel, "parallel", 1, "scenarios at once (each run mostly waits, and has its own nodes and ports); each one's report is printed whole when it ends")
	junit = junitFlag(cmd, "scenario")
	return cmd
}

// runScenarios runs the scenarios, parallel at a time, and returns the names of those that did not
// show what they expect (in the given order) and how many ran (an interrupt stops the rest). One at a
// time, a scenario reports as it goes, with its progress line; several at once, each report is held
// back and printed whole when its run ends, so reports do not interleave.
func runScenarios(cmd *cobra.Command, chosen []scenarios.Scenario, o scenarioOverrides, parallel int) (failed []string, ran int, err error) {
	w := cmd.OutOrStdout()
	var mu sync.Mutex // w and the junit report
	met := make([]bool, len(chosen))
	done := make([]bool, len(chosen))
	// Side by side, the longest runs start first, so that no long one is left running alone at the end.
	order := make([]int, len(chosen))
	for i := range order {
		order[i] = i
	}
	if parallel > 1 {
		slices.SortStableFunc(order, func(a, b int) int {
			return cmp.Compare(o.expectedLength(chosen[b]), o.expectedLength(chosen[a]))
		})
	}
	err = eachAtOnce(len(chosen), parallel, func(k int) error {
		i := order[k]
		if cmd.Context().Err() != nil {
			return nil
		}
		if parallel == 1 {
			m, err := runScenario(cmd, w, progressWriter(), chosen[i], o)
			met[i], done[i] = m, true
			if jerr := o.junit.write(); jerr != nil && err == nil {
				err = jerr
			}
			return err
		}
		var buf bytes.Buffer
		m, err := runScenario(cmd, &buf, nil, chosen[i], o)
		mu.Lock()
		defer mu.Unlock()
		w.Write(buf.Bytes())
		met[i], done[i] = m, true
		if jerr := o.junit.write(); jerr != nil && err == nil {
			err = jerr
		}
		return err
	})
	for i, s := range chosen {
		if done[i] {
			ran++
			if !met[i] {
				failed = append(failed, s.Name)
			}
		}
	}
	return failed, ran, err
}

// onBackend keeps the scenarios whose system and faults backend can run, and names the others.
func onBackend(w io.Writer, all []scenarios.Scenario, o scenarioOverrides) []scenarios.Scenario {
	if o.backend == "" || o.backend == systems.BackendLocal {
		return all
	}
	var kept, left []string
	var out []scenarios.Scenario
	for _, s := range all {
		// Resolve refuses what the backend cannot run: the system, or a fault it does not offer.
		cfg := s.Config
		o.applyBackend(&cfg) // the Engine too: a remote one runs fewer systems
		if cfg.Resolve() == nil {
			out = append(out, s)
			kept = append(kept, s.Name)
		} else {
			left = append(left, s.Name)
		}
	}
	if len(left) > 0 {
		fmt.Fprintf(w, "--backend %s: %d scenarios it can run; left out (system or faults not on %s): %s\n\n", o.backend, len(kept), o.backend, strings.Join(left, " "))
	}
	return out
}
