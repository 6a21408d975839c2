package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/nemesis"
	"github.com/lockpick-dev/lockpick/results"
)

// cardRun runs a card's rows, some at a time, and rewrites the card after every run.
type cardRun struct {
	cmd    *cobra.Command
	w      io.Writer
	dir    string // the card's directory in the store
	store  string
	report string
	card   *results.LibraryCard
	cfgs   []harness.Config // per row of card.Rows
	seeds  []uint64
	began  time.Time

	mu       sync.Mutex // everything below, the card and the output
	left     []int      // per row, the seeds not yet run or left out
	done     int        // runs finished or left out
	expected time.Duration
	ran      time.Duration // wall time of the finished runs
	ranPlan  time.Duration // their expected lengths
	crashed  bool
	allSeeds bool // --all-seeds: a broken row runs its later seeds too
	// libraryRan: card.Library is what a run recorded, not the guess made before any run.
	libraryRan bool
}

// cardOverhead is about what a run costs beside its plan: nodes and clients starting, the check.
const cardOverhead = 4 * time.Second

func newCardRun(cmd *cobra.Command, base harness.Config, rows []cardRow, seeds []uint64, store string, timeLimit time.Duration) (*cardRun, error) {
	began := time.Now()
	dir, err := results.NewRunDir(store, cardName(base), began)
	if err != nil {
		return nil, err
	}
	card := &results.LibraryCard{Lock: base.Lock, Program: programOf(base), Library: libraryOf(base.Lock), Declares: declares(base),
		Started: began, Revision: buildStamp().FullRevision(), Version: buildStamp().Version(), Command: cmdLine(), Seeds: seeds}
	c := &cardRun{cmd: cmd, w: cmd.OutOrStdout(), dir: dir, store: store, card: card, seeds: seeds, began: began}
	for _, row := range rows {
		cfg := row.config(base)
		if timeLimit > 0 {
			cfg.TimeLimit = harness.Duration(timeLimit)
		}
		c.cfgs = append(c.cfgs, cfg)
		cr := &results.CardRow{ID: row.id, What: row.what, Group: row.group, Remedies: row.remedies, Remedy: row.remedy,
			Must: row.must, Skipped: row.skip, Plain: row.id == plainRow}
		if row.skip == "" {
			cr.Nemesis, cr.Settings = cfg.Nemesis, settings(cfg)
			c.left = append(c.left, len(seeds))
		} else {
			c.left = append(c.left, 0)
		}
		card.Rows = append(card.Rows, cr)
	}
	return c, nil
}

// programOf is the client program of --lock client, its path left as the user gave it.
func programOf(base harness.Config) []string {
	if base.Lock != locks.ClientLock {
		return nil
	}
	return base.ClientCmd
}

// libraryOf names the code under test before any run: a Go module's version from this binary's
// build information, or lockpick's own lock; a client program names itself when it runs
// (runLibrary).
func libraryOf(lock string) results.Library {
	k, err := locks.Lookup(lock)
	switch {
	case err != nil || k.Program:
		return results.Library{}
	case k.Library != "":
		return results.Library{Name: k.Library, Version: moduleVersion(k.Library), Source: history.LibraryModule}
	}
	return results.Library{Name: "lockpick " + locks.Base(lock), Version: buildStamp().Version(), Source: history.LibraryBuiltIn}
}

// moduleVersion is the version this binary was built with of the module that provides pkg.
func moduleVersion(pkg string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	best, version := "", ""
	for _, d := range info.Deps {
		if (pkg == d.Path || strings.HasPrefix(pkg, d.Path+"/")) && len(d.Path) > len(best) {
			best, version = d.Path, d.Version
		}
	}
	return version
}

// runLibrary is the library a run recorded: the harness's word, else its config.json's (a stored
// run read again by --from).
func runLibrary(out *harness.Outcome) results.Library {
	lib := out.Library
	if lib == nil {
		var cfg struct {
			Library *history.Library `json:"library"`
		}
		b, err := os.ReadFile(filepath.Join(out.Dir, results.ConfigFile))
		if err != nil || json.Unmarshal(b, &cfg) != nil || cfg.Library == nil {
			return results.Library{}
		}
		lib = cfg.Library
	}
	return results.Library{Name: lib.Name, Version: lib.Version, Module: lib.Module, Source: lib.Kind}
}

type cardJob struct {
	row  int
	seed uint64
}

// expectedLength is about how long a row's run takes: its plan and the overhead of a run.
func expectedLength(cfg harness.Config) time.Duration {
	return time.Duration(cfg.TimeLimit+cfg.Recovery) + cardOverhead
}

// jobs lists the runs seed by seed, so that a row broken in its first seed leaves out its later
// ones; within a seed the longest runs go first, so that none is left running alone at the end.
func (c *cardRun) jobs() []cardJob {
	var jobs []cardJob
	for _, seed := range c.seeds {
		var rows []int
		for i, row := range c.card.Rows {
			if row.Skipped == "" {
				rows = append(rows, i)
			}
		}
		slices.SortStableFunc(rows, func(a, b int) int { return cmp.Compare(expectedLength(c.cfgs[b]), expectedLength(c.cfgs[a])) })
		for _, i := range rows {
			jobs = append(jobs, cardJob{row: i, seed: seed})
			c.expected += expectedLength(c.cfgs[i])
		}
	}
	return jobs
}

func (c *cardRun) runAll(parallel int) error {
	jobs := c.jobs()
	fmt.Fprintf(c.w, "card %s: %d rows (%d skipped), %d runs, seeds %v, %d at a time; about %s\n", c.card.Lock, c.rowsRun(), len(c.card.Rows)-c.rowsRun(),
		len(jobs), c.seeds, parallel, roughDuration(timeLeft(c.expected, 0, 0, parallel)))
	if err := results.WriteLibraryCard(c.dir, c.card); err != nil {
		return err
	}
	return eachAtOnce(len(jobs), parallel, func(i int) error { return c.run(jobs[i], len(jobs), parallel) })
}

func (c *cardRun) rowsRun() int {
	n := 0
	for _, row := range c.card.Rows {
		if row.Skipped == "" {
			n++
		}
	}
	return n
}

// run runs one row at one seed, unless an earlier seed broke the row already.
func (c *cardRun) run(job cardJob, total, parallel int) error {
	if c.cmd.Context().Err() != nil {
		return nil
	}
	c.mu.Lock()
	row := c.card.Rows[job.row]
	if row.Verdict() == results.Broke && !c.allSeeds {
		row.NotRun++
		c.left[job.row]--
		c.done++
		c.expected -= expectedLength(c.cfgs[job.row])
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	cfg := c.cfgs[job.row]
	cfg.Seed = job.seed
	began := time.Now()
	out, err := harness.Run(c.cmd.Context(), cfg, nil)
	return c.record(job, out, err, time.Since(began), total, parallel)
}

// record puts one run of a row on the card, prints a progress line and rewrites the card.
func (c *cardRun) record(job cardJob, out *harness.Outcome, err error, took time.Duration, total, parallel int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	row, cfg := c.card.Rows[job.row], c.cfgs[job.row]
	c.left[job.row]--
	c.done++
	c.ran += took
	c.ranPlan += expectedLength(cfg)
	var r *results.CardRun
	if err != nil {
		c.crashed = true
		r = &results.CardRun{Seed: job.seed, Error: relativeError(c.store, err), Took: results.Duration(took)}
	} else {
		rel, _ := filepath.Rel(c.store, out.Dir)
		r = results.NewCardRun(job.seed, rel, out.Result, took, out.StoppedEarly != "")
		if !c.libraryRan {
			// The run's own word (a program's init_ok, the module built in) beats the guess made
			// before any run.
			if lib := runLibrary(out); lib.Name != "" {
				c.card.Library, c.libraryRan = lib, true
			}
		}
	}
	row.Runs = append(row.Runs, r)
	// Progress goes to stderr: stdout is the card, which a user may redirect to a file.
	fmt.Fprintln(c.cmd.ErrOrStderr(), c.progress(job, r, took, total, parallel))
	if out != nil {
		for _, u := range out.Unwritten {
			fmt.Fprintf(c.cmd.ErrOrStderr(), "  warning: %s\n", u)
		}
	}
	c.writeCard()
	if c.cmd.Context().Err() != nil {
		return fmt.Errorf("interrupted; partial card in %s", c.dir)
	}
	return nil
}

// progress is one run's progress line: how many runs are done, the row and seed, what the run
// showed, how long it took and about how long the rest will take.
func (c *cardRun) progress(job cardJob, r *results.CardRun, took time.Duration, total, parallel int) string {
	left := timeLeft(c.expected-c.ranPlan, c.ranPlan, c.ran, parallel)
	return fmt.Sprintf("run %d/%d %s seed %d: %s (%s, %s)", c.done, total, c.card.Rows[job.row].ID, job.seed, runWords(r),
		roughDuration(took), aboutLeft(left))
}

// timeLeft estimates the wall time the remaining runs take: their plans (plannedLeft) scaled by how
// long the finished runs took beside their own plans (ran against ranPlan; a loaded machine takes
// longer than planned), shared among the runs going at once.
func timeLeft(plannedLeft, ranPlan, ran time.Duration, parallel int) time.Duration {
	rest := plannedLeft
	if ranPlan > 0 {
		rest = time.Duration(float64(rest) * float64(ran) / float64(ranPlan))
	}
	return max(rest/time.Duration(max(parallel, 1)), 0)
}

// roughDuration is a duration as a person reads it on a progress line: 12 s, 3 min, 1 h 5 min.
func roughDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Round(time.Minute)/time.Minute))
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%d h %d min", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// aboutLeft says how long is left, or that nothing is.
func aboutLeft(d time.Duration) string {
	if d < time.Second {
		return "nothing left"
	}
	if d < time.Minute {
		d = max(d.Round(10*time.Second), 10*time.Second)
	}
	return "about " + roughDuration(d) + " left"
}

// runWords says what one run showed about the lock.
func runWords(r *results.CardRun) string {
	switch {
	case r.Error != "":
		return "could not run: " + r.Error
	case r.Verdict == checker.Invalid.String():
		words, at := "invalid", "—"
		if r.First != nil {
			words, at = results.FindingWords(r.First.Kind), checker.FormatTime(r.First.At)
		}
		if r.Findings != "" {
			return fmt.Sprintf("%s: %s; the first, %s, at %s (%s)", results.Broke, r.Findings, words, at, r.Dir)
		}
		return fmt.Sprintf("%s: %s at %s (%s)", results.Broke, words, at, r.Dir)
	case r.Verdict == checker.Valid.String():
		return fmt.Sprintf("%s, %d grants (%s)", results.Kept, r.Grants, r.Dir)
	}
	return fmt.Sprintf("%s: %s (%s)", results.NotJudged, r.Unknown, r.Dir)
}

// fromStore makes the card of stored runs: for each row and seed the latest run in store of the
// row's name, lock, nemeses and workload, checked again from its history by this build's checker.
func (c *cardRun) fromStore(store string) error {
	total := len(c.seeds) * c.rowsRun()
	c.store = store // the runs' directories are named relative to the store they are in
	c.card.Rejudged = true
	for i, row := range c.card.Rows {
		if row.Skipped != "" {
			continue
		}
		for _, seed := range c.seeds {
			job := cardJob{row: i, seed: seed}
			dir, err := storedRun(store, c.cfgs[i], seed)
			if err != nil && row.Verdict() == results.Broke && !c.allSeeds {
				// The card that made these runs left this seed out: the row had broken already.
				row.NotRun++
				c.left[i]--
				c.done++
				continue
			}
			var out *harness.Outcome
			if err == nil {
				var res *checker.Result
				res, err = checker.CheckFile(filepath.Join(dir, history.FileName), checker.Options{Timeout: 2 * time.Minute})
				out = &harness.Outcome{Dir: dir, Result: res}
			}
			if err := c.record(job, out, err, 0, total, 1); err != nil {
				return err
			}
		}
	}
	return nil
}

// storedRun finds the latest finished run (one with a history) in store of cfg's name, lock,
// nemeses and workload with seed.
func storedRun(store string, cfg harness.Config, seed uint64) (string, error) {
	entries, err := os.ReadDir(filepath.Join(store, cfg.Name))
	if err != nil {
		return "", fmt.Errorf("no stored run of %s in %s: run the card first (without --from)", cfg.Name, store)
	}
	for i := len(entries) - 1; i >= 0; i-- {
		dir := filepath.Join(store, cfg.Name, entries[i].Name())
		got, err := readRunConfig(dir)
		if err != nil || got.Seed != seed || got.Lock != cfg.Lock || normalNemesis(got.Nemesis) != normalNemesis(cfg.Nemesis) || (cfg.Workload != "" && got.Workload != cfg.Workload) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, history.FileName)); err != nil {
			// A run stopped before it wrote its history (the card was cut short): it says nothing
			// about the lock, so an earlier finished run of the seed stands for it.
			continue
		}
		return dir, nil
	}
	return "", fmt.Errorf("no stored run of %s with seed %d in %s (of this row's lock, nemeses and workload): run the card first", cfg.Name, seed, store)
}

// normalNemesis is a nemesis text as a resolved run stores it.
func normalNemesis(text string) string {
	specs, err := nemesis.ParseSpecs(text)
	if err != nil {
		return text
	}
	return nemesis.JoinSpecs(specs)
}

// runConfig is what a card reads of a stored run's config.json.
type runConfig struct {
	Lock, Nemesis, Workload string
	Seed                    uint64
}

func readRunConfig(dir string) (runConfig, error) {
	var cfg runConfig
	b, err := os.ReadFile(filepath.Join(dir, results.ConfigFile))
	if err != nil {
		return cfg, err
	}
	return cfg, json.Unmarshal(b, &cfg)
}

// finish prints the rows, copies the card to --report, and gives the exit code: 1 when the lock
// broke its promise in a lock row, else 255 when a run could not start, else 2 when a lock row
// could not judge, else 0.
func (c *cardRun) finish() error {
	c.card.Took = results.Duration(time.Since(c.began))
	c.writeCard()
	fmt.Fprintln(c.w)
	broke, unjudged := false, false
	for _, row := range c.card.Rows {
		v := row.Verdict()
		fmt.Fprintf(c.w, "%-9s %-20s %s\n", row.Group, row.ID, rowLine(row, v))
		if row.Group == results.GroupLock {
			broke = broke || v == results.Broke
			unjudged = unjudged || v == results.NotJudged || v == results.NotRun
		}
	}
	fmt.Fprintf(c.w, "\n%s\n", c.card.Headline)
	for _, r := range c.card.Remedies {
		by := ""
		if r.By != "" {
			by = " (shown by row " + r.By + ")"
		}
		fmt.Fprintf(c.w, "  %s: %s%s\n", r.Row, r.Remedy, by)
	}
	fmt.Fprintf(c.w, "card: %s (%v)\n", filepath.Join(c.dir, results.LibraryCardMarkdown), time.Duration(c.card.Took).Round(time.Second))
	if c.report != "" {
		if err := writeReport(c.report, c.card); err != nil {
			return err
		}
	}
	switch {
	case broke:
		return exitError{1}
	case c.crashed:
		return exitError{255}
	case unjudged:
		return exitError{2}
	}
	return nil
}

// writeCard rewrites the card. It is derived from the runs, each stored with its own verdict: a
// card that cannot be written is a warning with its fix, and the card's verdict still decides the
// exit code.
func (c *cardRun) writeCard() {
	if err := results.WriteLibraryCard(c.dir, c.card); err != nil {
		fmt.Fprintf(c.w, "  warning: %v: %s\n", err, results.WriteFix(err))
	}
}

// rowLine is a row's verdict in one line of the final table.
func rowLine(row *results.CardRow, v string) string {
	switch {
	case v == results.SkippedRow:
		return "skipped: " + row.Skipped
	case v == results.Broke:
		r, left := row.FirstBroken(), ""
		words, at := "invalid", "—"
		if r.First != nil {
			words, at = results.FindingWords(r.First.Kind), checker.FormatTime(r.First.At)
		}
		if row.NotRun > 0 {
			left = fmt.Sprintf(", %d left out", row.NotRun)
		}
		return fmt.Sprintf("%s: %s at %s (seed %d; %d of %d seeds run broke it%s) %s", v, words, at, r.Seed, row.Broken(), len(row.Runs), left, r.Dir)
	}
	return fmt.Sprintf("%s, %d seeds", v, len(row.Runs))
}

// relativeError is err's text with the store's path taken out of the run directories it names: the
// card names runs relative to its store, errors included, so a committed card holds no machine path.
func relativeError(store string, err error) string {
	return strings.ReplaceAll(err.Error(), store+string(filepath.Separator), "")
}
