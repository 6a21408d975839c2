package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/scenarios"
)

func newScenarioCmd() *cobra.Command {
	var list bool
	var seed uint64
	var store string
	var timeLimit time.Duration
	cmd := &cobra.Command{
		Use:   "scenario [NAME...]",
		Short: "Run named scenarios and compare each verdict with the expected one",
		Long: `scenario runs each named scenario (all of them when none is named) and exits 0 when every
verdict is the expected one, 1 when any differs, 255 when a run could not start or crashed.`,
		Example: "  lockpick scenario redlock-restart --seed 3\n  lockpick scenario --list",
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			if list {
				for _, s := range scenarios.All() {
					fmt.Fprintf(w, "%-26s expect %-8s %s\n", s.Name, s.Expect, s.Why)
				}
				return nil
			}
			var chosen []scenarios.Scenario
			if len(args) == 0 {
				chosen = scenarios.All()
			}
			for _, name := range args {
				s, err := scenarios.Find(name)
				if err != nil {
					return err
				}
				chosen = append(chosen, s)
			}
			mismatches := 0
			for _, s := range chosen {
				cfg := s.Config
				cfg.Name, cfg.Store, cfg.Revision = s.Name, store, revision
				cfg.Seed = seed
				if !cmd.Flags().Changed("seed") {
					cfg.Seed = randomSeed()
				}
				if timeLimit > 0 {
					cfg.TimeLimit = harness.Duration(timeLimit)
				}
				fmt.Fprintf(w, "== %s: %s (seed %d)\n", s.Name, s.Why, cfg.Seed)
				out, err := harness.Run(cmd.Context(), cfg, progressWriter())
				if err != nil {
					return fmt.Errorf("scenario %s: %w", s.Name, err)
				}
				fmt.Fprint(w, out.Result.Summary())
				got := out.Result.Valid
				verdict := "as expected"
				if got != s.Expect {
					verdict = "UNEXPECTED"
					mismatches++
				}
				fmt.Fprintf(w, "== %s: expected %s, got %s: %s (%s)\n\n", s.Name, s.Expect, got, verdict, out.Dir)
				if out.Interrupted {
					break
				}
			}
			if mismatches > 0 {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&list, "list", false, "list the scenarios and their expected verdicts")
	cmd.Flags().Uint64Var(&seed, "seed", 0, "seed for every scenario (default random, printed)")
	cmd.Flags().StringVar(&store, "store", "store", "directory of the run store")
	cmd.Flags().DurationVar(&timeLimit, "time-limit", 0, "override each scenario's time limit")
	return cmd
}
