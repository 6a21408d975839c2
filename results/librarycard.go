package results

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
)

// Library card files of a `lockpick card` run.
const (
	LibraryCardMarkdown = "card.md"
	LibraryCardJSON     = "card.json"
)

// LibraryCard is the report card of one lock library: every fault row its design is exposed to (a
// scenario file with its expectation), run with several seeds.
type LibraryCard struct {
	// Library names the locks the card covers, as --lock calls them.
	Library  string     `json:"library"`
	Started  time.Time  `json:"started"`
	Revision string     `json:"revision"`
	Command  []string   `json:"command,omitempty"`
	Seeds    []uint64   `json:"seeds"`
	Rows     []*CardRow `json:"rows"`
}

// CardRow is one fault row: a scenario and its runs, one per seed.
type CardRow struct {
	Scenario string `json:"scenario"`
	Why      string `json:"why"`
	Lock     string `json:"lock"`
	Nemesis  string `json:"nemesis"`
	Workload string `json:"workload"`
	// Expected is the scenario's expectation in words; ExpectInvalid whether it expects findings.
	Expected      string     `json:"expected"`
	ExpectInvalid bool       `json:"expect_invalid"`
	Runs          []*CardRun `json:"runs"`
}

// CardRun is one seed of a row.
type CardRun struct {
	Seed uint64 `json:"seed"`
	// Error is set when the run could not start or crashed; the other fields are then empty.
	Error   string `json:"error,omitempty"`
	Verdict string `json:"verdict,omitempty"`
	// Missed lists how the run differed from the row's expectation; empty when it met it.
	Missed []string `json:"missed,omitempty"`
	// First is the earliest finding that made the run invalid, nil when there was none.
	First *checker.FirstFinding `json:"first,omitempty"`
	// Promised is the validity the lock promised its holds; Unbounded the holds with no deadline.
	Promised  checker.Latency `json:"promised"`
	Unbounded int             `json:"unbounded,omitempty"`
	Grants    int             `json:"grants"`
	// Server is the server program the run used, when the system names one ("etcd 3.4.23").
	Server string `json:"server,omitempty"`
	Dir    string `json:"dir,omitempty"`
}

// NewCardRun summarises one checked run of a row; missed is how it differed from the expectation.
func NewCardRun(seed uint64, dir, server string, r *checker.Result, missed []string) *CardRun {
	return &CardRun{
		Seed: seed, Verdict: r.Valid.String(), Missed: missed, First: r.FirstFinding,
		Promised: r.Stats.Promised, Unbounded: r.Stats.Unbounded, Grants: r.Stats.Holds, Server: server, Dir: dir,
	}
}

// Met counts the row's runs that met its expectation.
func (row *CardRow) Met() int {
	n := 0
	for _, r := range row.Runs {
		if r.Error == "" && len(r.Missed) == 0 {
			n++
		}
	}
	return n
}

// MedianFirst is the median time to the first finding over the runs that had one, and how many did.
func (row *CardRow) MedianFirst() (median int64, n int) {
	var at []int64
	for _, r := range row.Runs {
		if r.First != nil {
			at = append(at, r.First.At)
		}
	}
	if len(at) == 0 {
		return -1, 0
	}
	slices.Sort(at)
	return at[len(at)/2], len(at)
}

// Sort orders the runs of every row by seed.
func (card *LibraryCard) Sort() {
	for _, row := range card.Rows {
		slices.SortFunc(row.Runs, func(a, b *CardRun) int { return cmp.Compare(a.Seed, b.Seed) })
	}
}

// WriteLibraryCard writes the card as card.json and card.md in dir.
func WriteLibraryCard(dir string, card *LibraryCard) error {
	card.Sort()
	return writeCardFiles(dir, LibraryCardJSON, LibraryCardMarkdown, card, card.Markdown)
}

// Markdown renders the card as one page: the rows' table, where the library broke its promise, and
// the runs behind every cell.
func (card *LibraryCard) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Report card: %s\n\n", card.Library)
	fmt.Fprintf(&b, "Started %s, revision %s, seeds %s%s.\n\n", card.Started.UTC().Format(time.RFC3339), card.Revision,
		joinSeeds(card.Seeds), card.servers())
	b.WriteString("| row | faults | expected | verdicts | met | first finding: median (per seed) | validity promised (p50) | grants (per seed) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, row := range card.Rows {
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %d/%d | %s | %s | %s |\n", row.Scenario, row.Nemesis, row.Expected,
			row.tally(), row.Met(), len(row.Runs), row.firstCell(), row.promisedCell(), row.grantsCell())
	}
	b.WriteString("\nA row is met when the run showed what its scenario file expects (verdict and findings). The first finding is the earliest event that made a run invalid: an overlap of two holds, a stale write the resource accepted, a lease the lock dropped before the deadline it promised, a deadlock. The validity promised is what the lock told its holders at each grant: the checker judges the lock by exactly that.\n")
	card.writeBroken(&b)
	b.WriteString("\n## Runs\n\n")
	for _, row := range card.Rows {
		for _, r := range row.Runs {
			if r.Error != "" {
				fmt.Fprintf(&b, "- %s seed %d: could not run: %s\n", row.Scenario, r.Seed, r.Error)
				continue
			}
			met := "met"
			if len(r.Missed) > 0 {
				met = "NOT MET: " + strings.Join(r.Missed, "; ")
			}
			fmt.Fprintf(&b, "- %s seed %d: %s, %s — %s\n", row.Scenario, r.Seed, r.Verdict, met, r.Dir)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeBroken lists, per row that found something, where the library broke its promise: the first
// finding of the earliest seed that had one, with the run that shows it.
func (card *LibraryCard) writeBroken(b *strings.Builder) {
	header := false
	for _, row := range card.Rows {
		for _, r := range row.Runs {
			if r.First == nil {
				continue
			}
			if !header {
				b.WriteString("\n## Where it broke its promise\n\n")
				header = true
			}
			fmt.Fprintf(b, "- **%s** (%s), seed %d, %s at %s: %s\n  run: %s\n", row.Scenario, row.Why, r.Seed, r.First.Kind,
				checker.FormatTime(r.First.At), r.First.Description, r.Dir)
			break
		}
	}
}

func (card *LibraryCard) servers() string {
	var s []string
	for _, row := range card.Rows {
		for _, r := range row.Runs {
			if r.Server != "" && !slices.Contains(s, r.Server) {
				s = append(s, r.Server)
			}
		}
	}
	if len(s) == 0 {
		return ""
	}
	return ", server " + strings.Join(s, ", ")
}

func (row *CardRow) tally() string {
	verdicts := make([]string, len(row.Runs))
	for i, r := range row.Runs {
		verdicts[i] = verdictOrCrashed(r.Verdict, r.Error)
	}
	return tally(verdicts)
}

func (row *CardRow) firstCell() string {
	median, n := row.MedianFirst()
	if n == 0 {
		return "—"
	}
	var per []string
	for _, r := range row.Runs {
		if r.First == nil {
			per = append(per, "—")
			continue
		}
		per = append(per, checker.FormatTime(r.First.At))
	}
	return fmt.Sprintf("%s in %d/%d (%s)", checker.FormatTime(median), n, len(row.Runs), strings.Join(per, ", "))
}

func (row *CardRow) promisedCell() string {
	var p50 []float64
	unbounded := 0
	for _, r := range row.Runs {
		if r.Promised.Count > 0 {
			p50 = append(p50, r.Promised.P50)
		}
		unbounded += r.Unbounded
	}
	if len(p50) == 0 {
		if unbounded > 0 {
			return "until release (no deadline)"
		}
		return "—"
	}
	slices.Sort(p50)
	return fmt.Sprintf("%.0f ms", p50[len(p50)/2])
}

func (row *CardRow) grantsCell() string {
	var g []string
	for _, r := range row.Runs {
		if r.Error != "" {
			g = append(g, "—")
			continue
		}
		g = append(g, fmt.Sprint(r.Grants))
	}
	return strings.Join(g, ", ")
}

func joinSeeds(seeds []uint64) string {
	s := make([]string, len(seeds))
	for i, v := range seeds {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}
