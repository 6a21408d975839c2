package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/results"
	"github.com/lockpick-dev/lockpick/scenarios"
)

func newCardCmd() *cobra.Command {
	var seedList, store, report, etcdServer, from string
	var parallel int
	var stopAtFirst bool
	cmd := &cobra.Command{
		Use:   "card LOCK...",
		Short: "Run a lock library through every fault row it is exposed to and write its report card",
		Long: `card runs every scenario file whose lock is one of LOCK... (its rows) once per seed and writes a
one-page report card, card.md and card.json, into store/card-LOCK/<timestamp>: per row the faults, the
expected outcome, the verdicts over the seeds, how many met the expectation, the time to the first
finding, the validity the library promised, and where it broke that promise, with the run that shows it.

It exits 0 when every run met its row's expectation, 1 when any did not, 255 when a run could not
start or crashed.`,
		Example: "  lockpick card etcd etcd-unlock-retry --seeds 1,2,3,4,5 --parallel 3\n  lockpick card watchdog --report docs/cards/watchdog.md",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			seeds, err := parseSeeds(seedList)
			if err != nil {
				return err
			}
			if parallel < 1 {
				return fmt.Errorf("--parallel must be at least 1, got %d", parallel)
			}
			rows, err := cardRows(args)
			if err != nil {
				return err
			}
			if store, err = filepath.Abs(store); err != nil {
				return fmt.Errorf("--store: %w", err)
			}
			started := time.Now()
			dir, err := results.NewRunDir(store, "card-"+args[0], started)
			if err != nil {
				return err
			}
			card := &results.LibraryCard{Library: strings.Join(args, ", "), Started: started, Revision: revision, Command: cmdLine(), Seeds: seeds}
			c := &cardRun{cmd: cmd, w: cmd.OutOrStdout(), dir: dir, card: card, report: report,
				o: scenarioOverrides{store: store, stopAtFirst: stopAtFirst, etcdServer: etcdServer}}
			for _, s := range rows {
				card.Rows = append(card.Rows, &results.CardRow{Scenario: s.Name, Why: s.Why, Lock: s.Config.Lock, Nemesis: s.Config.Nemesis,
					Workload: s.Config.Workload, Expected: s.Expect.String(), ExpectInvalid: s.Expect.Verdict.String() == "invalid"})
			}
			if from != "" {
				err = c.fromStore(rows, seeds, from)
			} else {
				err = c.runAll(rows, seeds, parallel)
			}
			if err != nil {
				return err
			}
			return c.finish(time.Since(started))
		},
	}
	f := cmd.Flags()
	f.StringVar(&seedList, "seeds", "1,2,3,4,5", "seeds to run each row with, comma-separated")
	f.IntVar(&parallel, "parallel", 2, "runs at once (each has its own nodes and ports)")
	f.StringVar(&store, "store", "store", "directory of the run store")
	f.StringVar(&report, "report", "", "also write the card's markdown to this file (for example docs/cards/etcd.md)")
	f.StringVar(&etcdServer, "etcd-server", "", etcdServerUsage)
	f.StringVar(&from, "from", "", "run nothing: make the card of the runs already in this store (the latest run of each row and seed, checked again)")
	f.BoolVar(&stopAtFirst, "stop-at-first", true, "end a row's fault phase at its first violation when one violation settles its expectation")
	return cmd
}

// cardRows are the built-in scenarios of the named locks, in name order.
func cardRows(lockNames []string) ([]scenarios.Scenario, error) {
	for _, l := range lockNames {
		if err := locks.Validate(l); err != nil {
			return nil, err
		}
	}
	all, err := scenarios.All()
	if err != nil {
		return nil, err
	}
	var rows []scenarios.Scenario
	for _, s := range all {
		if slices.Contains(lockNames, s.Config.Lock) {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no scenario file runs lock %s: write its rows as scenarios/%s-<fault>.yaml (see scenarios/single-*.yaml)",
			strings.Join(lockNames, " or "), lockNames[0])
	}
	return rows, nil
}

// cardRun runs a card's rows, some at a time, and rewrites the card after every run.
type cardRun struct {
	cmd    *cobra.Command
	w      io.Writer
	dir    string
	card   *results.LibraryCard
	report string
	o      scenarioOverrides

	mu      sync.Mutex // the card and the output
	crashed bool
}

type cardJob struct {
	row  int
	s    scenarios.Scenario
	seed uint64
}

func (c *cardRun) runAll(rows []scenarios.Scenario, seeds []uint64, parallel int) error {
	var jobs []cardJob
	for i, s := range rows {
		for _, seed := range seeds {
			jobs = append(jobs, cardJob{row: i, s: s, seed: seed})
		}
	}
	return eachAtOnce(len(jobs), parallel, func(i int) error { return c.run(jobs[i]) })
}

// run runs one row at one seed and records it on the card.
func (c *cardRun) run(job cardJob) error {
	o := c.o
	o.seed = &job.seed
	out, err := harness.Run(c.cmd.Context(), o.config(job.s), nil)
	if err != nil {
		return c.record(job, "", "", nil, nil, err)
	}
	return c.record(job, out.Dir, serverOf(out.Dir), out.Result, missed(job.s, out), nil)
}

// record puts one run of a row on the card and rewrites the card: server is the server program it
// used, missed how it differed from the row's expectation, err that it could not start or crashed.
func (c *cardRun) record(job cardJob, dir, server string, res *checker.Result, missed []string, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	row := c.card.Rows[job.row]
	if err != nil {
		c.crashed = true
		row.Runs = append(row.Runs, &results.CardRun{Seed: job.seed, Error: err.Error()})
		fmt.Fprintf(c.w, "%s seed %d: could not run: %v\n", job.s.Name, job.seed, err)
	} else {
		r := results.NewCardRun(job.seed, dir, server, res, missed)
		row.Runs = append(row.Runs, r)
		met := "met"
		if len(missed) > 0 {
			met = "NOT MET: " + strings.Join(missed, "; ")
		}
		fmt.Fprintf(c.w, "%s seed %d: %s, expected %s: %s (%s)\n", job.s.Name, job.seed, r.Verdict, job.s.Expect, met, dir)
	}
	if err := results.WriteLibraryCard(c.dir, c.card); err != nil {
		return err
	}
	if c.cmd.Context().Err() != nil {
		return fmt.Errorf("interrupted; partial report card in %s", c.dir)
	}
	return nil
}

// fromStore makes the card of stored runs: for each row and seed the latest run in store of the
// same scenario, lock, nemeses and workload, checked again from its history, so the card judges it
// by the checker of this build.
func (c *cardRun) fromStore(rows []scenarios.Scenario, seeds []uint64, store string) error {
	for i, s := range rows {
		for _, seed := range seeds {
			job := cardJob{row: i, s: s, seed: seed}
			dir, server, err := storedRun(store, s, seed, c.o.etcdServer)
			if err != nil {
				if err := c.record(job, "", "", nil, nil, err); err != nil {
					return err
				}
				continue
			}
			res, err := checker.CheckFile(filepath.Join(dir, history.FileName), checker.Options{Timeout: 2 * time.Minute})
			var miss []string
			if err == nil {
				miss = s.Expect.Met(res)
			}
			if err := c.record(job, dir, server, res, miss, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// storedRun finds the latest run of scenario s with seed in store (and with the etcd server asked,
// when one is), and the server program it used.
func storedRun(store string, s scenarios.Scenario, seed uint64, etcdServer string) (dir, server string, err error) {
	entries, err := os.ReadDir(filepath.Join(store, s.Name))
	if err != nil {
		return "", "", fmt.Errorf("no stored run of %s in %s: run it first (lockpick card without --from)", s.Name, store)
	}
	for i := len(entries) - 1; i >= 0; i-- {
		dir := filepath.Join(store, s.Name, entries[i].Name())
		cfg, err := readRunConfig(dir)
		if err != nil || cfg.Seed != seed || cfg.Lock != s.Config.Lock || cfg.Nemesis != s.Config.Nemesis {
			continue
		}
		if (s.Config.Workload != "" && cfg.Workload != s.Config.Workload) || (etcdServer != "" && cfg.EtcdServer != etcdServer) {
			continue
		}
		return dir, cfg.server(), nil
	}
	return "", "", fmt.Errorf("no stored run of %s with seed %d in %s (of this scenario's lock, nemeses and workload): run it first", s.Name, seed, store)
}

// runConfig is what a card reads of a stored run's config.json.
type runConfig struct {
	Lock, Nemesis, Workload string
	Seed                    uint64
	EtcdServer              string `json:"etcd_server"`
	Etcd                    *struct {
		Version string `json:"version"`
	} `json:"etcd"`
}

func readRunConfig(dir string) (runConfig, error) {
	var cfg runConfig
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return cfg, err
	}
	return cfg, json.Unmarshal(b, &cfg)
}

// server names the server program the run used ("etcd 3.4.23"); empty for systems that name none.
func (cfg runConfig) server() string {
	if cfg.Etcd == nil {
		return ""
	}
	return "etcd " + cfg.Etcd.Version
}

// finish prints the rows, copies the card to --report, and gives the exit code.
func (c *cardRun) finish(took time.Duration) error {
	missed := 0
	fmt.Fprintln(c.w)
	for _, row := range c.card.Rows {
		fmt.Fprintf(c.w, "%-34s expected %-40s met %d/%d\n", row.Scenario, row.Expected, row.Met(), len(row.Runs))
		missed += len(row.Runs) - row.Met()
	}
	fmt.Fprintf(c.w, "report card: %s (%v)\n", filepath.Join(c.dir, results.LibraryCardMarkdown), took.Round(time.Second))
	if c.report != "" {
		if err := os.MkdirAll(filepath.Dir(c.report), 0o755); err != nil {
			return fmt.Errorf("--report %s: %w", c.report, err)
		}
		f, err := os.Create(c.report)
		if err != nil {
			return fmt.Errorf("--report %s: %w", c.report, err)
		}
		if err := c.card.Markdown(f); err != nil {
			f.Close()
			return fmt.Errorf("--report %s: %w", c.report, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("--report %s: %w", c.report, err)
		}
	}
	switch {
	case c.crashed:
		return exitError{255}
	case missed > 0:
		return exitError{1}
	}
	return nil
}

// serverOf names the server program a stored run used, from its config.json; empty for systems
// that do not name one.
func serverOf(dir string) string {
	cfg, err := readRunConfig(dir)
	if err != nil {
		return ""
	}
	return cfg.server()
}
