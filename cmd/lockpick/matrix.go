package main

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/nemesis"
	"github.com/lockpick-dev/lockpick/results"
	"github.com/lockpick-dev/lockpick/scenarios"
)

func newMatrixCmd() *cobra.Command {
	var lockList string
	var nemeses []string
	var seedList string
	var parallel int
	var firstSeed uint64
	var base harness.Config
	var junit *string
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Run every lock under every nemesis with several seeds and write a report card",
		Long: `matrix runs each cell (a lock under one --nemeses value) once per seed of --seeds, --parallel at a time,
and writes a report card, report.md and report.json, into store/matrix/<timestamp>: per cell the
verdicts, the findings that made runs invalid, the time to the first, held (the share of the time
the lock was held) and acquires ok (the share of acquires granted).

--nemeses takes one cell per value; repeat the flag for more cells, and compose nemeses inside a
cell with commas: --nemeses restart --nemeses partition:kind=client-minority,clock.
It exits as run and card do: 1 when any run was invalid; else 255 when a run could not start or
crashed; else 2 when any verdict was unknown; else 0 (every run valid).`,
		Example: `  lockpick matrix --locks single,redlock --nemeses none --nemeses restart --nemeses clock:target=majority --seeds 1-3`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			lockNames := strings.Split(lockList, ",")
			for _, l := range lockNames {
				if err := locks.Validate(l); err != nil {
					return fmt.Errorf("--locks: %w", err)
				}
			}
			if len(nemeses) == 0 {
				nemeses = []string{"none"}
			}
			if parallel < 1 {
				return fmt.Errorf("--parallel must be at least 1, got %d", parallel)
			}
			if cmd.Flags().Changed("first-seed") {
				return fmt.Errorf("--first-seed %d: --seeds now lists the seeds themselves, as in run and card: use --seeds %d-%d", firstSeed, firstSeed, firstSeed+2)
			}
			seeds, err := parseSeeds(seedList)
			if err != nil {
				return err
			}
			store, err := filepath.Abs(base.Store)
			if err != nil {
				return fmt.Errorf("--store %s: %w", base.Store, err)
			}
			base.Store = store
			base.Command = cmdLine()
			stampConfig(&base)
			// Every cell is checked before the first one runs, so a typo does not surface an hour in.
			known, _ := scenarios.All() // without them, cells just carry no expectation
			var cells []*results.Cell
			for _, l := range lockNames {
				for _, n := range nemeses {
					cfg := base
					cfg.Lock, cfg.Nemesis = l, n
					cellClient(&cfg)
					if err := cfg.Resolve(); err != nil {
						return err
					}
					cells = append(cells, &results.Cell{Lock: l, Nemesis: cfg.Nemesis, Expected: cellExpectation(known, cfg)})
				}
			}
			started := time.Now()
			dir, err := results.NewRunDir(base.Store, "matrix", started)
			if err != nil {
				return err
			}
			card := &results.Card{Started: started, Revision: base.Revision, Version: base.Version, Command: cmdLine(), Settings: map[string]string{
				"ttl": time.Duration(base.TTL).String(), "time limit": time.Duration(base.TimeLimit).String(), "clients": fmt.Sprint(base.Clients),
				"keys": fmt.Sprint(base.Keys), "client groups": fmt.Sprint(base.ClientGroups), "fault interval": time.Duration(base.Interval).String(),
			}}
			cellSettings(card.Settings, cmd, base)
			card.Cells = cells
			j := newJUnit(*junit, "lockpick matrix")
			m := &matrixRun{cmd: cmd, w: w, base: base, dir: dir, card: card, junit: j, parallel: parallel}
			if err := m.runAll(cells, seeds); err != nil {
				return err
			}
			fmt.Fprintf(w, "\n")
			for _, c := range cells {
				fmt.Fprintf(w, "%-8s %-40s %s\n", c.Lock, c.Nemesis, c.Tally())
			}
			fmt.Fprintf(w, "report card: %s, %s (%v)\n", filepath.Join(dir, results.CardMarkdown), filepath.Join(dir, results.CardJSON), time.Since(started).Round(time.Second))
			return exitError{matrixExitCode(cells)}
		},
	}
	f := cmd.Flags()
	f.StringVar(&lockList, "locks", "single,redlock", fmt.Sprintf("locks to run, comma-separated: %v", locks.Names()))
	f.StringArrayVar(&nemeses, "nemeses", nil, fmt.Sprintf("one cell's nemeses; repeat for more cells (default none): %v", nemesis.Names()))
	seedsFlag(f, &seedList, "1,2,3", "run each cell once per seed of this list")
	f.IntVar(&parallel, "parallel", 1, "runs at once (each run mostly waits, and has its own nodes and ports)")
	f.Uint64Var(&firstSeed, "first-seed", 0, "gone: --seeds lists the seeds")
	_ = f.MarkHidden("first-seed") // kept only to refuse it with the fix
	optionFlags(f, "matrix", &base)
	junit = junitFlag(cmd, "cell (a failure when any seed is invalid)")
	return cmd
}

// expectedFor is the verdict the built-in scenarios of this lock and nemeses expect: those with the
// same nemeses whose parameters agree with the cell's wherever both set one (a scenario may pin
// timings the cell leaves to defaults). Empty when none matches or matching scenarios disagree.
func expectedFor(all []scenarios.Scenario, lock, nem, persistence string) string {
	cell, err := nemesis.ParseSpecs(nem)
	if err != nil {
		return ""
	}
	expected := ""
	for _, s := range all {
		p := s.Config.Persistence
		if p == "" {
			p = "none"
		}
		if s.Config.Lock != lock || p != persistence || (s.Config.Workload != "" && s.Config.Workload != "mutex") {
			continue
		}
		specs, err := nemesis.ParseSpecs(s.Config.Nemesis)
		if err != nil || !compatible(cell, specs) {
			continue
		}
		v := s.Expect.Verdict.String()
		if expected != "" && expected != v {
			return ""
		}
		expected = v
	}
	return expected
}

// compatible reports whether two lists of nemeses name the same nemeses with no parameter set to
// different values.
func compatible(a, b []nemesis.Spec) bool {
	if len(a) != len(b) {
		return false
	}
	byName := map[string]nemesis.Spec{}
	for _, s := range b {
		byName[s.Name] = s
	}
	for _, s := range a {
		o, ok := byName[s.Name]
		if !ok {
			return false
		}
		for k, v := range s.Params {
			if ov, set := o.Params[k]; set && ov != v {
				return false
			}
		}
	}
	return true
}

// cellSettings records on the card every flag that shapes the cells and was given.
func cellSettings(m map[string]string, cmd *cobra.Command, base harness.Config) {
	for _, name := range []string{"nodes", "node-timeout", "workload", "guard", "hold-max", "careful", "extend", "think-max", "restart-delay", "persistence"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			m[strings.ReplaceAll(name, "-", " ")] = f.Value.String()
		}
	}
}

// cellExpectation is expectedFor a resolved cell: none for the counter workload, whose outcome
// depends on the guard, nor for a cell that reshapes the workload (renewals, careful holders), which
// no built-in scenario describes.
func cellExpectation(all []scenarios.Scenario, cfg harness.Config) string {
	if cfg.Workload != "mutex" || cfg.Extend || cfg.Careful {
		return ""
	}
	return expectedFor(all, cfg.Lock, cfg.Nemesis, cfg.Persistence)
}

// matrixRun runs a matrix's cells, `parallel` runs at a time. Runs mostly wait (on think times and
// the network), and each has its own nodes and ports, so a few at once cost the verdicts nothing.
type matrixRun struct {
	cmd      *cobra.Command
	w        io.Writer
	base     harness.Config
	dir      string
	card     *results.Card
	junit    *junitReport
	parallel int

	mu sync.Mutex // the card, the cells' runs, the output
}

type matrixJob struct {
	cell *results.Cell
	seed uint64
}

func (m *matrixRun) runAll(cells []*results.Cell, seeds []uint64) error {
	var jobs []matrixJob
	for _, c := range cells {
		for _, s := range seeds {
			jobs = append(jobs, matrixJob{c, s})
		}
	}
	return eachAtOnce(len(jobs), m.parallel, func(i int) error { return m.run(jobs[i], cells) })
}

// run runs one cell at one seed and records it on the card.
func (m *matrixRun) run(job matrixJob, cells []*results.Cell) error {
	c := job.cell
	cfg := m.base
	cfg.Lock, cfg.Nemesis, cfg.Seed = c.Lock, c.Nemesis, job.seed
	cellClient(&cfg)
	cfg.Name = "matrix-" + c.Lock + "-" + nemesis.Slug(c.Nemesis)
	var progress io.Writer
	if m.parallel == 1 {
		progress = progressWriter()
		fmt.Fprintf(m.w, "%s under %s, seed %d: ", c.Lock, c.Nemesis, job.seed)
	}
	began := time.Now()
	out, err := harness.Run(m.cmd.Context(), cfg, progress)
	took := time.Since(began)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.parallel > 1 {
		fmt.Fprintf(m.w, "%s under %s, seed %d: ", c.Lock, c.Nemesis, job.seed)
	}
	if err != nil {
		c.Runs = append(c.Runs, &results.CellRun{Seed: job.seed, Error: err.Error(), FirstViolation: -1, Took: results.Duration(took)})
		fmt.Fprintf(m.w, "could not run: %v\n", err)
	} else {
		r := results.NewCellRun(job.seed, out.Dir, out.Result)
		r.Took = results.Duration(took)
		if runExitCode(out) == 2 {
			r.Verdict = "unknown" // cut short: never valid
		}
		c.Runs = append(c.Runs, r)
		fmt.Fprintln(m.w, r.Words())
		for _, warn := range append(out.Warnings, out.Unwritten...) {
			fmt.Fprintln(m.w, "  warning:", warn)
		}
	}
	slices.SortFunc(c.Runs, func(a, b *results.CellRun) int { return cmp.Compare(a.Seed, b.Seed) })
	// The card is rewritten after every run, so an interrupted matrix keeps what it did. It is
	// derived from the runs' own results: a card that cannot be written is a warning, the verdicts
	// stand.
	if err := results.WriteCard(m.dir, m.card); err != nil {
		fmt.Fprintf(m.w, "  warning: %v: %s\n", err, results.WriteFix(err))
	}
	m.junit.setCells(cells)
	if err := m.junit.write(); err != nil {
		fmt.Fprintf(m.w, "  warning: %v\n", err)
	}
	if m.cmd.Context().Err() != nil {
		return fmt.Errorf("interrupted; partial report card in %s", m.dir)
	}
	return nil
}

// matrixExitCode is the matrix's exit code, as a card's: 1 when any run was invalid; else 255 when
// a run could not start or crashed; else 2 when a verdict was unknown; else 0.
func matrixExitCode(cells []*results.Cell) int {
	invalid, crashed, unknown := false, false, false
	for _, c := range cells {
		for _, r := range c.Runs {
			switch {
			case r.Error != "":
				crashed = true
			case r.Verdict == checker.Invalid.String():
				invalid = true
			case r.Verdict != checker.Valid.String():
				unknown = true
			}
		}
	}
	switch {
	case invalid:
		return 1
	case crashed:
		return 255
	case unknown:
		return 2
	}
	return 0
}

// cellClient keeps --client-cmd and --client-capabilities for the client lock's cells alone.
func cellClient(cfg *harness.Config) {
	if cfg.Lock != locks.ClientLock {
		cfg.ClientCmd, cfg.ClientCaps = nil, nil
	}
}
