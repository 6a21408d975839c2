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
	Error      string `json:"error,omitempty"`
	Violations int    `json:"violations"`
	// FirstViolation is the time from the run's start to the first finding that made the run invalid
	// (an overlap, a stale write, an early loss...), in nanoseconds; -1 when there was none.
	// FirstKind names that finding (checker.FirstFinding).
	FirstViolation int64  `json:"first_violation"`
	FirstKind      string `json:"first_kind,omitempty"`
	// Availability is the share of acquires that succeeded.
	Availability float64 `json:"availability"`
	OKAcquires   int     `json:"ok_acquires"`
	OKInFaults   int     `json:"ok_in_faults"`
	Overruns     int     `json:"overruns"`
	Dir          string  `json:"dir"`
}

// NewCellRun summarises one checked run for the card.
func NewCellRun(seed uint64, dir string, r *checker.Result) *CellRun {
	c := &CellRun{
		Seed: seed, Dir: dir, Verdict: r.Valid.String(), Violations: r.ViolationCount, FirstViolation: -1,
		Availability: r.Stats.Availability, OKAcquires: r.Stats.Acquires.OK, OKInFaults: r.Stats.OKInFaults,
		Overruns: r.OverrunCount,
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
	b.WriteString("| lock | nemesis | verdicts | expected | violations | first finding | availability | ok acquires in faults |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, c := range card.Cells {
		expected := "—"
		if c.Expected != "" {
			mark := "✗"
			if c.Matches() {
				mark = "✓"
			}
			expected = c.Expected + " " + mark
		}
		var viol, first, avail, inFaults []string
		for _, r := range c.Runs {
			if r.Error != "" {
				viol, first, avail, inFaults = append(viol, "—"), append(first, "—"), append(avail, "—"), append(inFaults, "—")
				continue
			}
			viol = append(viol, fmt.Sprint(r.Violations))
			f := "—"
			if r.FirstViolation >= 0 {
				f = checker.FormatTime(r.FirstViolation)
				if r.FirstKind != checker.FindingViolation {
					f += " (" + r.FirstKind + ")"
				}
			}
			first = append(first, f)
			avail = append(avail, fmt.Sprintf("%.1f%%", 100*r.Availability))
			inFaults = append(inFaults, fmt.Sprint(r.OKInFaults))
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s | %s | %s | %s |\n", c.Lock, c.Nemesis, c.Tally(), expected,
			strings.Join(viol, ", "), strings.Join(first, ", "), strings.Join(avail, ", "), strings.Join(inFaults, ", "))
	}
	b.WriteString("\nPer-seed values are listed in seed order. Availability is the share of acquires that succeeded; on a hot key most attempts meet a held lock, so compare it between cells rather than read it as an absolute. ")
	b.WriteString("Expected verdicts come from the built-in scenario with the same lock and nemeses (the table in docs/expected-outcomes.md); ✓ means every seed reached it.\n\n## Runs\n\n")
	for _, c := range card.Cells {
		for _, r := range c.Runs {
			if r.Error != "" {
				fmt.Fprintf(&b, "- %s `%s` seed %d: could not run: %s\n", c.Lock, c.Nemesis, r.Seed, r.Error)
				continue
			}
			fmt.Fprintf(&b, "- %s `%s` seed %d: %s, %d violations — %s\n", c.Lock, c.Nemesis, r.Seed, r.Verdict, r.Violations, r.Dir)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
