package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/locks"
)

// selfCell is one scenario of the self-test: a change to the base configuration.
type selfCell struct {
	name  string
	shape func(c *harness.Config)
}

// selfCells are the self-test's scenarios. All share a TTL of 1.5s (not a whole number of seconds,
// so a lease sent in whole seconds is shorter than promised), three keys, ten clients and three
// Redlock nodes, with
// holds drawn across the validity (the default): bugs that shorten a lease show at its end.
var selfCells = []selfCell{
	{"none", func(c *harness.Config) {}},
	{"extend", func(c *harness.Config) { c.Extend = true }},
	// One client group's links slowed to about half the TTL, with a node timeout to match (to every
	// node of a single lock, to one of Redlock's three): its acquires take long, so a lock that
	// forgets the time an acquire took promises too much; its releases take long, so a release in
	// two round trips leaves a wide window; its requests to Redlock's slow node land after another
	// client's, so a quorum one too small grants twice. Group turns make the slow group win its
	// share of races.
	{"slow-group", func(c *harness.Config) {
		c.ClientGroups, c.NodeTimeout = 2, harness.Duration(900*time.Millisecond)
		target := "all"
		if locks.Base(c.Lock) == "redlock" {
			target = "minority"
		}
		c.Nemesis = "latency:group=c2:target=" + target + ":mode=steady:delay=700ms:duration=2s:interval=500ms"
	}},
	// Every node's clock runs 0.8% fast for most of the run: keys expire about 12ms early, inside
	// the 17ms drift allowance of a 1.5s lease, so a lock without the allowance promises too much.
	// Waiters retry within 5ms, so one is there when a key expires those 12ms early; the cell runs
	// twice as long as the others, as only holds that reach their deadline can show the defect.
	{"drift", func(c *harness.Config) {
		c.ThinkMax = harness.Duration(5 * time.Millisecond)
		c.TimeLimit *= 2
		c.Nemesis = "clock:jump=fast:rate=0.008:target=all:duration=" + (time.Duration(c.TimeLimit) - time.Second).String() + ":interval=200ms"
	}},
	// Every client's wall clock runs 1.5s (the TTL) ahead for 3s at a time: locks that read no
	// client clock are unaffected, one that dates its deadlines by it promises a TTL too much.
	// Holds run up to twice the TTL, so most outlive their lease: a correct lock's end at its deadline
	// (overruns), a lock that promised a TTL too much holds on into the next holder's lease.
	{"client-clock", func(c *harness.Config) {
		c.HoldMax, c.ThinkMax = 2*c.TTL, harness.Duration(5*time.Millisecond)
		c.Nemesis = "client-clock:target=all:offset=1500ms:duration=3s:interval=1s"
	}},
	// The slow group's requests time out (a spike three node timeouts long) and land late.
	{"timeouts", func(c *harness.Config) {
		c.ClientGroups = 2
		c.Nemesis = "latency:group=c2:target=all:mode=spike:duration=1s:interval=1s"
	}},
}

// selfOrder is the order in which the self-test tries cells on each mutant: the cell expected to
// catch it first; it stops at the first cell that does.
var selfOrder = map[string][]string{
	"redlock-quorum-off-by-one":   {"slow-group", "none"},
	"redlock-validity-from-reply": {"slow-group", "timeouts"},
	"redlock-release-del":         {"none", "slow-group"},
	"single-seconds":              {"none", "extend"},
	"single-release-del":          {"none", "slow-group"},
	"single-release-get-del":      {"slow-group", "none"},
	"single-extend-unchecked":     {"extend"},
	"single-timeout-grants":       {"timeouts", "slow-group"},
	"redlock-no-drift":            {"drift"},
	"single-wall-clock":           {"client-clock"},
}

func selfCellNamed(name string) selfCell {
	i := slices.IndexFunc(selfCells, func(c selfCell) bool { return c.name == name })
	return selfCells[i]
}

func newSelftestCmd() *cobra.Command {
	var seeds, correctSeeds, parallel int
	var store, report string
	var timeLimit time.Duration
	cmd := &cobra.Command{
		Use:   "selftest",
		Short: "Run lockpick's deliberately broken locks and report which scenarios catch them",
		Long: `selftest runs each of lockpick's deliberately broken locks (mutants: a wrong quorum, a
validity that forgets the acquire's time, a lease sent in whole seconds, releases by plain DEL or
in two round trips, an unchecked extend, timeouts counted as grants, no drift allowance, deadlines by the wall clock) through
the scenarios that
should expose it, one seed at a time, stopping at the first scenario that gives an invalid
verdict; then runs the correct single and redlock locks through every scenario. It prints the
mutation score and exits 0 when every mutant was caught in all but at most one seed and every run
of a correct lock was valid, 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if parallel < 1 {
				return fmt.Errorf("--parallel must be at least 1, got %d", parallel)
			}
			if seeds < 1 || correctSeeds < 0 {
				return fmt.Errorf("--seeds must be at least 1 and --correct-seeds at least 0, got %d and %d", seeds, correctSeeds)
			}
			if timeLimit < 3*time.Second {
				return fmt.Errorf("--time-limit %v is too short for a 1.5s TTL: use at least 3s", timeLimit)
			}
			if store == "" {
				dir, err := os.MkdirTemp("", "lockpick-selftest-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				store = dir
			}
			st := &selftest{w: cmd.OutOrStdout(), store: store, timeLimit: timeLimit, began: time.Now()}
			ok, err := st.run(cmd, seeds, correctSeeds, parallel)
			if err != nil {
				return err
			}
			text := st.table(seeds, correctSeeds)
			fmt.Fprint(st.w, "\n"+text)
			if report != "" {
				if err := os.WriteFile(report, []byte(text), 0o644); err != nil {
					return fmt.Errorf("--report: %w", err)
				}
			}
			if !ok {
				return exitError{1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&seeds, "seeds", 5, "seeds per mutant (1, 2, ...)")
	f.IntVar(&correctSeeds, "correct-seeds", 5, "seeds per scenario for the correct locks")
	f.IntVar(&parallel, "parallel", 3, "runs at once (each run mostly waits; its nodes and ports are its own)")
	f.DurationVar(&timeLimit, "time-limit", 8*time.Second, "fault phase of each run")
	f.StringVar(&store, "store", "", "directory for the runs (default: a temporary directory, removed afterwards)")
	f.StringVar(&report, "report", "", "also write the score table (markdown) to this file")
	return cmd
}

// selftest is one self-test in progress.
type selftest struct {
	w         io.Writer
	store     string
	timeLimit time.Duration
	began     time.Time
	mutants   []mutantScore
	correct   []correctScore
}

type mutantScore struct {
	m      locks.Mutant
	caught int
	cells  []string        // cells that caught it, in order of first catch
	first  []time.Duration // time to the first finding, per caught seed
	runs   int
}

type correctScore struct {
	lock, cell  string
	valid, runs int
	bad         []string
}

func (st *selftest) config(lock string, cell selfCell, seed uint64) harness.Config {
	c := harness.Config{
		Lock: lock, Clients: 10, Keys: 3, TTL: harness.Duration(1500 * time.Millisecond),
		TimeLimit: harness.Duration(st.timeLimit), Recovery: harness.Duration(time.Second),
		Seed: seed, Store: st.store, Command: cmdLine(),
		Name: "selftest-" + lock + "-" + cell.name,
	}
	if locks.Base(lock) == "redlock" {
		c.Nodes = 3 // a minority is then exactly one node
	}
	stampConfig(&c)
	cell.shape(&c)
	return c
}

// selfJob is one unit of the self-test: a mutant's seed (its cells tried in order until one
// catches it) or a correct lock's run in one cell.
type selfJob struct {
	mutant int // index into st.mutants, or -1 for a correct lock's run
	lock   string
	cells  []string
	seed   uint64
	// results, filled by the worker: verdict and time to first finding per cell tried, the run dirs.
	verdicts []checker.Verdict
	first    time.Duration
	dirs     []string
	err      error
}

// run runs every job on `parallel` workers. Runs spend most of their time waiting on the network
// and on think times, so a few at once cost the verdicts nothing on two cores, and the whole
// self-test stays within its time budget.
func (st *selftest) run(cmd *cobra.Command, seeds, correctSeeds, parallel int) (bool, error) {
	var jobs []*selfJob
	for i, m := range locks.Mutants() {
		st.mutants = append(st.mutants, mutantScore{m: m})
		for s := 1; s <= seeds; s++ {
			jobs = append(jobs, &selfJob{mutant: i, lock: locks.MutantPrefix + m.Name, cells: selfOrder[m.Name], seed: uint64(s)})
		}
	}
	for _, lock := range []string{"single", "redlock"} {
		for _, cell := range selfCells {
			for s := 1; s <= correctSeeds; s++ {
				jobs = append(jobs, &selfJob{mutant: -1, lock: lock, cells: []string{cell.name}, seed: uint64(s)})
			}
		}
	}
	var mu sync.Mutex // the progress lines
	_ = eachAtOnce(len(jobs), parallel, func(i int) error {
		st.runJob(cmd, jobs[i], &mu)
		return nil // a job's error is its own, tallied below
	})
	return st.tally(jobs, seeds)
}

// runJob runs one job's cells in order, stopping at the first invalid verdict.
func (st *selftest) runJob(cmd *cobra.Command, j *selfJob, mu *sync.Mutex) {
	for _, name := range j.cells {
		out, err := harness.Run(cmd.Context(), st.config(j.lock, selfCellNamed(name), j.seed), nil)
		if err != nil {
			j.err = fmt.Errorf("%s, cell %s, seed %d: %w", j.lock, name, j.seed, err)
			return
		}
		r := out.Result
		j.verdicts, j.dirs = append(j.verdicts, r.Valid), append(j.dirs, out.Dir)
		mu.Lock()
		fmt.Fprintf(st.w, "%-35s %-10s seed %d: %s\n", j.lock, name, j.seed, r.Valid)
		mu.Unlock()
		if r.Valid == checker.Invalid {
			j.first = firstFinding(r)
			return
		}
	}
}

// tally folds the jobs' results into the score, in the jobs' order.
func (st *selftest) tally(jobs []*selfJob, seeds int) (bool, error) {
	ok := true
	correct := map[[2]string]int{} // (lock, cell) -> index in st.correct
	for _, j := range jobs {
		if j.err != nil {
			return false, j.err
		}
		if j.mutant >= 0 {
			sc := &st.mutants[j.mutant]
			sc.runs += len(j.verdicts)
			if n := len(j.verdicts); n > 0 && j.verdicts[n-1] == checker.Invalid {
				sc.caught++
				sc.first = append(sc.first, j.first)
				if c := j.cells[n-1]; !slices.Contains(sc.cells, c) {
					sc.cells = append(sc.cells, c)
				}
			}
			continue
		}
		id := [2]string{j.lock, j.cells[0]}
		i, seen := correct[id]
		if !seen {
			i = len(st.correct)
			correct[id] = i
			st.correct = append(st.correct, correctScore{lock: j.lock, cell: j.cells[0]})
		}
		cs := &st.correct[i]
		cs.runs++
		if j.verdicts[0] == checker.Valid {
			cs.valid++
		} else {
			cs.bad = append(cs.bad, j.dirs[0])
			ok = false
		}
	}
	for _, sc := range st.mutants {
		if sc.caught < seeds-seeds/5 {
			ok = false
		}
	}
	return ok, nil
}

// firstFinding is the time, on the run clock, of the earliest finding that made r invalid.
func firstFinding(r *checker.Result) time.Duration {
	first := int64(-1)
	at := func(t int64) {
		if first < 0 || t < first {
			first = t
		}
	}
	for _, v := range r.Violations {
		at(v.OverlapStart)
	}
	for _, l := range r.EarlyLosses {
		at(l.Completed)
	}
	for _, l := range r.LateExtends {
		at(l.Completed)
	}
	for _, t := range r.TokenRegressions {
		at(t.Later.Start)
	}
	return time.Duration(max(first, 0))
}

// table renders the score as markdown.
func (st *selftest) table(seeds, correctSeeds int) string {
	var b strings.Builder
	caught := 0
	for _, m := range st.mutants {
		if m.caught >= seeds-seeds/5 {
			caught++
		}
	}
	fmt.Fprintf(&b, "mutation score: %d / %d mutants caught in at least %d of %d seeds (self-test took %v)\n\n",
		caught, len(st.mutants), seeds-seeds/5, seeds, time.Since(st.began).Round(time.Second))
	fmt.Fprintf(&b, "| mutant | defect | cells that caught it | seeds caught | median time to first finding | runs |\n|---|---|---|---|---|---|\n")
	for _, m := range st.mutants {
		med := "-"
		if len(m.first) > 0 {
			s := slices.Clone(m.first)
			slices.Sort(s)
			med = s[len(s)/2].Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d of %d | %s | %d |\n", m.m.Name, m.m.Defect, strings.Join(m.cells, ", "), m.caught, seeds, med, m.runs)
	}
	fmt.Fprintf(&b, "\n| correct lock | cell | valid runs |\n|---|---|---|\n")
	for _, c := range st.correct {
		fmt.Fprintf(&b, "| %s | %s | %d of %d |\n", c.lock, c.cell, c.valid, c.runs)
	}
	for _, c := range st.correct {
		for _, d := range c.bad {
			fmt.Fprintf(&b, "\nnot valid: %s in %s: %s\n", c.lock, c.cell, d)
		}
	}
	return b.String()
}
