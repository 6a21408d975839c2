package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/scenarios"
)

// seedsFlag adds --seeds, which means the same in run, card and matrix: a list of seeds.
func seedsFlag(f *pflag.FlagSet, p *string, def, what string) {
	f.StringVar(p, "seeds", def, what+": seeds separated by commas, and ranges (for example 1,2,3 or 1-20)")
}

// parseSeeds reads --seeds: seeds and ranges of seeds separated by commas, each seed given once.
func parseSeeds(text string) ([]uint64, error) {
	var seeds []uint64
	seen := map[uint64]bool{}
	for _, part := range strings.Split(text, ",") {
		lo, hi, err := seedRange(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("--seeds %q: %q is not a seed: give whole numbers of at least 0 separated by commas, or ranges (for example --seeds 1,2,3 or --seeds 1-20)", text, part)
		}
		for s := lo; s <= hi; s++ {
			if seen[s] {
				return nil, fmt.Errorf("--seeds %q: seed %d is given twice: give each seed once", text, s)
			}
			seen[s] = true
			seeds = append(seeds, s)
		}
	}
	return seeds, nil
}

// maxSeedRange bounds a range of seeds: each seed is a run of a minute or so.
const maxSeedRange = 10000

// seedRange reads "7" or "1-20".
func seedRange(part string) (lo, hi uint64, err error) {
	a, b, isRange := strings.Cut(part, "-")
	if lo, err = strconv.ParseUint(a, 10, 64); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = strconv.ParseUint(b, 10, 64); err != nil {
		return 0, 0, err
	}
	if hi < lo || hi-lo >= maxSeedRange {
		return 0, 0, fmt.Errorf("range %s", part)
	}
	return lo, hi, nil
}

// seedTally summarises several runs of one configuration.
type seedTally struct {
	lines                   []string
	valid, invalid, unknown int
}

func (t *seedTally) add(seed uint64, out *harness.Outcome) {
	r := out.Result
	code := runExitCode(out)
	switch code {
	case 0:
		t.valid++
	case 1:
		t.invalid++
	default:
		t.unknown++
	}
	verdict := map[int]string{0: "valid", 1: "invalid", 2: "unknown"}[code]
	t.lines = append(t.lines, fmt.Sprintf("seed %d: %s, %d violations, %d early lease losses, %d late extends, %d overruns, %d of %d holds released in the last tenth of their validity; %s",
		seed, verdict, r.ViolationCount, r.EarlyLossCount, r.LateExtendCount, r.OverrunCount, r.Stats.NearDeadline, r.Stats.Holds, out.Dir))
}

// print writes one line per seed and the tally.
func (t *seedTally) print(w io.Writer) {
	fmt.Fprintln(w)
	for _, l := range t.lines {
		fmt.Fprintln(w, l)
	}
	n := t.valid + t.invalid + t.unknown
	fmt.Fprintf(w, "%d seeds: %d valid, %d invalid, %d unknown\n", n, t.valid, t.invalid, t.unknown)
}

// code is the exit code of several runs: invalid if any run was, else unknown if any was.
func (t *seedTally) code() int {
	switch {
	case t.invalid > 0:
		return 1
	case t.unknown > 0:
		return 2
	}
	return 0
}

// runSeeds runs cfg once per seed of list, one run at a time, and summarises them.
func runSeeds(cmd *cobra.Command, cfg harness.Config, list, junitPath string) error {
	if cmd.Flags().Changed("seed") {
		return fmt.Errorf("--seed and --seeds together: give the seeds to run in --seeds alone")
	}
	seeds, err := parseSeeds(list)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	j := newJUnit(junitPath, "lockpick run")
	var t seedTally
	for _, seed := range seeds {
		cfg.Seed = seed
		began := time.Now()
		out, err := harness.Run(cmd.Context(), cfg, progressWriter())
		j.addRun(cfg, out, err, time.Since(began))
		if err != nil {
			return fmt.Errorf("seed %d: %w", seed, err)
		}
		fmt.Fprintf(w, "seed %d: %s", seed, out.Result.Summary())
		printOutcome(w, out)
		t.add(seed, out)
		if cmd.Context().Err() != nil {
			break
		}
	}
	if err := j.write(); err != nil {
		return err
	}
	t.print(w)
	return exitError{t.code()}
}

// runFileSeeds runs a scenario file once per seed of --seeds and exits 0 when every run showed
// what the file expects.
func runFileSeeds(cmd *cobra.Command, s scenarios.Scenario, o scenarioOverrides) error {
	if o.seed != nil {
		return fmt.Errorf("--seed and --seeds together: give the seeds to run in --seeds alone")
	}
	list, _ := cmd.Flags().GetString("seeds")
	seeds, err := parseSeeds(list)
	if err != nil {
		return err
	}
	missed := 0
	for _, seed := range seeds {
		o.seed = &seed
		met, err := runScenario(cmd, cmd.OutOrStdout(), progressWriter(), s, o)
		if err != nil {
			return fmt.Errorf("seed %d: %w", seed, err)
		}
		if !met {
			missed++
		}
		if cmd.Context().Err() != nil {
			break
		}
	}
	if err := o.junit.write(); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%d seeds: %d showed what %s expects, %d did not\n", len(seeds), len(seeds)-missed, s.Name, missed)
	if missed > 0 {
		return exitError{1}
	}
	return nil
}
