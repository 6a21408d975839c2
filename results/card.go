package results

import (
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
)

// Report card files of a matrix run.
const (
	CardMarkdown = "report.md"
	CardJSON     = "report.json"
)

// Card is the report card of a matrix: every cell (a lock under a set of nemeses) run with several
// seeds.
type Card struct {
	Started time.Time `json:"started"`
	// Version is the lockpick that ran the matrix (lockpick version); Revision its git revision.
	Version  string   `json:"version,omitempty"`
	Revision string   `json:"revision"`
	Command  []string `json:"command,omitempty"`
	// Settings are the run settings every cell shares (TTL, time limit, clients...).
	Settings map[string]string `json:"settings"`
	Cells    []*Cell           `json:"cells"`
}

// Cell is one lock under one combination of nemeses, with one run per seed.
type Cell struct {
	Lock    string `json:"lock"`
	Nemesis string `json:"nemesis"`
	// Expected is the verdict a built-in scenario expects for this lock and nemesis, when one exists.
	Expected string     `json:"expected,omitempty"`
	Runs     []*CellRun `json:"runs"`
}

// CellRun is one seed of a cell.
type CellRun struct {
	Seed    uint64 `json:"seed"`
	Verdict string `json:"verdict"`
	// Error is set when the run could not start or crashed; the other fields are then empty.
	Error string `json:"error,omitempty"`
	// Findings names what made the run invalid ("1 early lease loss"); empty when nothing did.
	// Violations counts its overlapping pairs of holds alone.
	Findings   string `json:"findings,omitempty"`
	Violations int    `json:"violations"`
	// FirstViolation is the time from the run's start to the first finding that made the run invalid
	// (an overlap, a stale write, an early loss...), in nanoseconds; -1 when there was none.
	// FirstKind names that finding (checker.FirstFinding).
	FirstViolation int64  `json:"first_violation"`
	FirstKind      string `json:"first_kind,omitempty"`
	// Held is the share of the run's time some client held the lock; AcquiresOK the share of
	// acquires granted (checker.Stats.HeldShare and AcquiresOKShare).
	Held       float64 `json:"held_share"`
	AcquiresOK float64 `json:"acquires_ok_share"`
	OKAcquires int     `json:"ok_acquires"`
	OKInFaults int     `json:"ok_in_faults"`
	Overruns   int     `json:"overruns"`
	Dir        string  `json:"dir"`
	// Took is how long the run took, start to verdict.
	Took Duration `json:"took,omitempty"`
}

// NewCellRun summarises one checked run for the card.
func NewCellRun(seed uint64, dir string, r *checker.Result) *CellRun {
	c := &CellRun{
		Seed: seed, Dir: dir, Verdict: r.Valid.String(), Findings: checker.Phrases(r.Tallies()), Violations: r.ViolationCount,
		FirstViolation: -1, Held: r.Stats.HeldShare, AcquiresOK: r.Stats.AcquiresOKShare, OKAcquires: r.Stats.Acquires.OK,
		OKInFaults: r.Stats.OKInFaults, Overruns: r.OverrunCount,
	}
	if f := r.FirstFinding; f != nil {
		c.FirstViolation, c.FirstKind = f.At, f.Kind
	}
	return c
}

// Tally counts the cell's verdicts, "3/3 invalid" or "2/3 invalid, 1/3 valid".
func (c *Cell) Tally() string {
	verdicts := make([]string, len(c.Runs))
	for i, r := range c.Runs {
		verdicts[i] = verdictOrCrashed(r.Verdict, r.Error)
	}
	return tally(verdicts)
}

// verdictOrCrashed is a run's verdict, or "crashed" when it could not run (err set).
func verdictOrCrashed(verdict, err string) string {
	if err != "" {
		return "crashed"
	}
	return verdict
}

// tally counts verdicts, "3/3 invalid" or "2/3 invalid, 1/3 valid".
func tally(verdicts []string) string {
	counts := map[string]int{}
	for _, v := range verdicts {
		counts[v]++
	}
	var parts []string
	for _, v := range []string{"invalid", "valid", "unknown", "crashed"} {
		if counts[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d/%d %s", counts[v], len(verdicts), v))
		}
	}
	return strings.Join(parts, ", ")
}

// Matches reports whether every run reached the expected verdict; false when nothing is expected.
func (c *Cell) Matches() bool {
	if c.Expected == "" || len(c.Runs) == 0 {
		return false
	}
	for _, r := range c.Runs {
		if r.Error != "" || r.Verdict != c.Expected {
			return false
		}
	}
	return true
}

// WriteCard writes the card as report.json and report.md in dir.
func WriteCard(dir string, card *Card) error {
	return writeCardFiles(dir, CardJSON, CardMarkdown, card, card.Markdown)
}

// writeCardFiles writes a card as JSON and as markdown in dir.
func writeCardFiles(dir, jsonName, mdName string, card any, markdown func(io.Writer) error) error {
	if err := WriteJSON(dir, jsonName, card); err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, mdName), markdown); err != nil {
		return fmt.Errorf("write report card: %w", err)
	}
	return nil
}

// Markdown renders the card.
func (card *Card) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# lockpick report card\n\n")
	fmt.Fprintf(&b, "Started %s, lockpick %s.", card.Started.UTC().Format(time.RFC3339), harnessVersion(card.Version, card.Revision))
	if len(card.Settings) > 0 {
		var s []string
		for _, k := range slices.Sorted(maps.Keys(card.Settings)) {
			s = append(s, k+" "+card.Settings[k])
		}
		fmt.Fprintf(&b, " Every cell: %s.", strings.Join(s, ", "))
	}
	b.WriteString("\n\n")
	b.WriteString("| lock | nemesis | verdicts | expected | findings | first finding | held | acquires ok | ok acquires in faults |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range card.Cells {
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s |\n", c.Lock, c.Nemesis, c.Tally(), c.expectedMark(), strings.Join(c.columns(), " | "))
	}
	b.WriteString("\nPer-seed values are listed in seed order. Held is the share of the run's time some client held the lock; acquires ok is the share of acquires granted (on a hot key most meet a held lock, so compare it between cells rather than read it as an absolute). ")
	b.WriteString("Expected verdicts come from the built-in scenario with the same lock and nemeses (the table in docs/expected-outcomes.md); ✓ means every seed reached it.\n\n## Runs\n\n")
	for _, c := range card.Cells {
		for _, r := range c.Runs {
			if r.Error != "" {
				fmt.Fprintf(&b, "- %s `%s` seed %d: could not run: %s\n", c.Lock, c.Nemesis, r.Seed, r.Error)
				continue
			}
			fmt.Fprintf(&b, "- %s `%s` seed %d: %s — %s\n", c.Lock, c.Nemesis, r.Seed, r.Words(), r.Dir)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// expectedMark is the cell's expected verdict and whether every seed reached it.
func (c *Cell) expectedMark() string {
	if c.Expected == "" {
		return "—"
	}
	if c.Matches() {
		return c.Expected + " ✓"
	}
	return c.Expected + " ✗"
}

// columns are the cell's per-seed columns of the card: findings, first finding, held, acquires ok,
// ok acquires in faults.
func (c *Cell) columns() []string {
	cols := make([][]string, 5)
	for _, r := range c.Runs {
		if r.Error != "" {
			for i := range cols {
				cols[i] = append(cols[i], "—")
			}
			continue
		}
		first := "—"
		if r.FirstViolation >= 0 {
			first = checker.FormatTime(r.FirstViolation)
			if r.FirstKind != checker.FindingViolation {
				first += " (" + checker.FindingName(r.FirstKind) + ")"
			}
		}
		cols[0] = append(cols[0], noneIfEmpty(r.Findings))
		cols[1] = append(cols[1], first)
		cols[2] = append(cols[2], fmt.Sprintf("%.1f%%", 100*r.Held))
		cols[3] = append(cols[3], fmt.Sprintf("%.1f%%", 100*r.AcquiresOK))
		cols[4] = append(cols[4], fmt.Sprint(r.OKInFaults))
	}
	out := make([]string, len(cols))
	for i, col := range cols {
		out[i] = strings.Join(col, ", ")
	}
	return out
}

// noneIfEmpty is s, or "none" when it is empty.
func noneIfEmpty(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Words is the run's verdict with what made it: "invalid: 1 early lease loss", "valid", or
// "could not run: ...".
func (r *CellRun) Words() string {
	switch {
	case r.Error != "":
		return "could not run: " + r.Error
	case r.Findings != "":
		return r.Verdict + ": " + r.Findings
	}
	return r.Verdict
}
