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

// Row groups of a library card: only the lock's own rows decide whether it kept its promise.
const (
	GroupLock     = "lock"
	GroupInherent = "inherent"
	GroupRemedy   = "remedy"
)

// Row verdicts: about the lock, not about an expectation.
const (
	Kept       = "kept its promise"
	Broke      = "broke its promise"
	NotJudged  = "could not judge"
	NotRun     = "could not run"
	SkippedRow = "skipped"
)

// LibraryCard certifies one lock: one battery of rows derived from what the lock declares, each
// run with several seeds and judged by the lock's own promise.
type LibraryCard struct {
	// Lock is the lock as --lock calls it; Program the client program of --lock client.
	Lock    string   `json:"lock"`
	Program []string `json:"program,omitempty"`
	// Library is who wrote the lock, when known.
	Library Library `json:"library"`
	// Declares is what the lock declares, in words: system, nodes, deadline, extend, tokens.
	Declares string    `json:"declares"`
	Started  time.Time `json:"started"`
	// Took is the card's wall time; Rejudged that it ran nothing, only checked stored runs again.
	Took     Duration `json:"took"`
	Rejudged bool     `json:"rejudged,omitempty"`
	// Version is the lockpick that ran the card (lockpick version); Revision its git revision.
	Version  string   `json:"version,omitempty"`
	Revision string   `json:"revision"`
	Command  []string `json:"command,omitempty"`
	Seeds    []uint64 `json:"seeds"`
	// AllSeeds: a broken row ran its later seeds too (--all-seeds), so its "seeds broken / run"
	// is how often the fault finds the break, not only that it can.
	AllSeeds bool `json:"all_seeds,omitempty"`
	// Headline is "SAFE under every row" or "UNSAFE under: ..."; Remedies the remedy rows proved.
	Headline string       `json:"headline"`
	Remedies []CardRemedy `json:"remedies,omitempty"`
	Rows     []*CardRow   `json:"rows"`
}

// Duration is a time.Duration written as text ("9m12s").
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).Round(time.Second).String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// Library names the code under test: a Go module and its version, or what a client program
// reported in its init_ok. Empty fields are unknown.
type Library struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	// Module is the Go module of an adapted Go library.
	Module string `json:"module,omitempty"`
	// Source says how the card knows: "client program" (its init_ok), "Go module", "built in".
	Source string `json:"source,omitempty"`
}

// CardRemedy is a remedy for a row the lock broke, proved by a row of the card that kept it.
type CardRemedy struct {
	Row    string `json:"row"`
	Remedy string `json:"remedy"`
	// By is the row that proved it; empty when the card shows none.
	By string `json:"by,omitempty"`
}

// CardRow is one row: what it does to the lock, and its runs, one per seed.
type CardRow struct {
	ID    string `json:"id"`
	What  string `json:"what"`
	Group string `json:"group"`
	// Remedies is the row this one remedies, Remedy the advice it proves when it kept its promise;
	// Must is what the application must add, for an inherent row.
	Remedies string `json:"remedies,omitempty"`
	Remedy   string `json:"remedy,omitempty"`
	Must     string `json:"must,omitempty"`
	// Skipped says why the row did not run on this lock, system or backend.
	Skipped string `json:"skipped,omitempty"`
	// Plain marks the row that does nothing to the lock but use it: broken there, the lock has a
	// bug no remedy fixes.
	Plain    bool       `json:"plain,omitempty"`
	Nemesis  string     `json:"nemesis,omitempty"`
	Settings string     `json:"settings,omitempty"`
	Runs     []*CardRun `json:"runs,omitempty"`
	// NotRun counts the seeds left out because an earlier seed already broke the row.
	NotRun int `json:"not_run,omitempty"`
}

// CardRun is one seed of a row.
type CardRun struct {
	Seed uint64 `json:"seed"`
	// Error is set when the run could not start or crashed; the other fields are then empty.
	Error   string `json:"error,omitempty"`
	Verdict string `json:"verdict,omitempty"`
	// Unknown says why the checker could not judge, when it could not.
	Unknown string `json:"unknown,omitempty"`
	// First is the earliest finding that made the run invalid, nil when there was none; Findings
	// names them all ("1 early lease loss").
	First    *checker.FirstFinding `json:"first,omitempty"`
	Findings string                `json:"findings,omitempty"`
	Grants   int                   `json:"grants"`
	// Promised is the validity the lock promised its holds (p50, ms); Unbounded the holds with none.
	Promised  float64 `json:"promised_ms,omitempty"`
	Unbounded int     `json:"unbounded,omitempty"`
	// Dir is the run's directory, relative to the store.
	Dir  string   `json:"dir,omitempty"`
	Took Duration `json:"took"`
	// StoppedEarly: the fault phase ended at the first violation.
	StoppedEarly bool `json:"stopped_early,omitempty"`
}

// NewCardRun summarises one checked run of a row.
func NewCardRun(seed uint64, dir string, r *checker.Result, took time.Duration, stoppedEarly bool) *CardRun {
	return &CardRun{
		Seed: seed, Verdict: r.Valid.String(), Unknown: r.UnknownReason, First: r.FirstFinding, Findings: checker.Phrases(r.Tallies()),
		Grants: r.Stats.Holds, Promised: r.Stats.Promised.P50, Unbounded: r.Stats.Unbounded, Dir: dir,
		Took: Duration(took), StoppedEarly: stoppedEarly,
	}
}

// Verdict is the row's verdict over its runs: broke if any seed broke the promise; could not run
// if a run could not start; could not judge if a run was unknown; kept if every run kept it.
func (row *CardRow) Verdict() string {
	if row.Skipped != "" {
		return SkippedRow
	}
	v := Kept
	for _, r := range row.Runs {
		switch {
		case r.Error == "" && r.Verdict == checker.Invalid.String():
			return Broke
		case r.Error != "":
			v = NotRun
		case r.Verdict != checker.Valid.String() && v != NotRun:
			v = NotJudged
		}
	}
	if len(row.Runs) == 0 {
		return NotJudged
	}
	return v
}

// FirstBroken is the run of the lowest seed that broke the row, nil when none did.
func (row *CardRow) FirstBroken() *CardRun {
	for _, r := range row.Runs {
		if r.Error == "" && r.Verdict == checker.Invalid.String() {
			return r
		}
	}
	return nil
}

// Finding is a broken run's first finding in words, and its time on the run clock.
func (r *CardRun) Finding() (words, at string) {
	if r.First == nil {
		return "invalid (see the run's report)", "—"
	}
	return FindingWords(r.First.Kind) + ": " + r.First.Description, checker.FormatTime(r.First.At)
}

// Broken counts the runs that broke the promise.
func (row *CardRow) Broken() int {
	n := 0
	for _, r := range row.Runs {
		if r.Error == "" && r.Verdict == checker.Invalid.String() {
			n++
		}
	}
	return n
}

// FindingWords names a finding kind as a user reads it.
func FindingWords(kind string) string {
	switch kind {
	case checker.FindingViolation:
		return "two holders"
	case checker.FindingEarlyLoss:
		return "early loss (the lease was gone before its deadline)"
	case checker.FindingLateExtend:
		return "late extend (a lease renewed after it had ended)"
	case checker.FindingDeadlock:
		return "deadlock"
	case checker.FindingStaleWrite:
		return "stale write accepted"
	case checker.FindingTokenRegression:
		return "token regression"
	}
	return strings.ReplaceAll(kind, "-", " ")
}

// Judge sets the card's headline and the remedies its rows prove, from the rows' verdicts.
func (card *LibraryCard) Judge() {
	var broke, unjudged []string
	card.Remedies = nil
	for _, row := range card.Rows {
		v := row.Verdict()
		switch {
		case row.Group == GroupLock && v == Broke:
			broke = append(broke, row.ID)
		case row.Group == GroupLock && (v == NotJudged || v == NotRun):
			unjudged = append(unjudged, row.ID)
		}
		if v == Broke && row.Group != GroupRemedy {
			card.Remedies = append(card.Remedies, card.remediesOf(row)...)
		}
	}
	if bare := card.brokeWithoutFault(); bare != "" {
		// A remedy changes how the system is run; a lock that breaks with nothing done to it has a
		// bug no such change fixes: keep only the remedies rows proved, and say so once.
		proved := []CardRemedy{{Row: bare, Remedy: "none: it broke with no fault at all, a bug in the lock itself"}}
		for _, r := range card.Remedies {
			if r.By != "" {
				proved = append(proved, r)
			}
		}
		card.Remedies = proved
	}
	switch {
	case len(broke) > 0:
		card.Headline = "UNSAFE under: " + strings.Join(broke, ", ")
	case len(unjudged) > 0:
		card.Headline = "NOT JUDGED under: " + strings.Join(unjudged, ", ") + " (safe under every row judged)"
	default:
		card.Headline = "SAFE under every row"
		if n := card.leftOut(); n > 0 {
			card.Headline = fmt.Sprintf("SAFE under every row run (%d of the battery's rows left out by --rows)", n)
		}
	}
}

// leftOut counts the lock's rows that --rows left out of the card.
func (card *LibraryCard) leftOut() int {
	n := 0
	for _, row := range card.Rows {
		if row.Group == GroupLock && strings.HasPrefix(row.Skipped, "left out by --rows") {
			n++
		}
	}
	return n
}

// brokeWithoutFault is the plain lock row when it broke, empty otherwise.
func (card *LibraryCard) brokeWithoutFault() string {
	for _, row := range card.Rows {
		if row.Group == GroupLock && row.Plain && row.Verdict() == Broke {
			return row.ID
		}
	}
	return ""
}

// remediesOf are the remedies the card proves for a broken row: its remedy rows that kept their
// promise; one entry without By when none did.
func (card *LibraryCard) remediesOf(broken *CardRow) []CardRemedy {
	var out []CardRemedy
	for _, row := range card.Rows {
		if row.Remedies == broken.ID && row.Verdict() == Kept {
			out = append(out, CardRemedy{Row: broken.ID, Remedy: row.Remedy, By: row.ID})
		}
	}
	if len(out) == 0 {
		none := "no remedy shown by this card"
		switch {
		case broken.Must != "":
			none = broken.Must
		case broken.Nemesis == "none":
			none = "none: it broke with no fault at all, a bug in the lock itself"
		}
		out = append(out, CardRemedy{Row: broken.ID, Remedy: none})
	}
	return out
}

// Sort orders the runs of every row by seed.
func (card *LibraryCard) Sort() {
	for _, row := range card.Rows {
		slices.SortFunc(row.Runs, func(a, b *CardRun) int { return cmp.Compare(a.Seed, b.Seed) })
	}
}

// WriteLibraryCard judges the card and writes it as card.json and card.md in dir.
func WriteLibraryCard(dir string, card *LibraryCard) error {
	card.Sort()
	card.Judge()
	return writeCardFiles(dir, LibraryCardJSON, LibraryCardMarkdown, card, card.Markdown)
}

// Markdown renders the card as one page: headline, remedies, the rows by group, what was skipped
// and every run.
func (card *LibraryCard) Markdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# lockpick card: %s\n\n**%s**\n\n", card.title(), card.Headline)
	fmt.Fprintf(&b, "%s.\n\n", card.identity())
	took := "took " + time.Duration(card.Took).Round(time.Second).String()
	if card.Rejudged {
		took = "made from stored runs, checked again by this build"
	}
	policy := "a row broken in one seed runs no more seeds"
	if card.AllSeeds {
		policy = "every row runs every seed, broken or not; a broken row's time to first finding is the median over its broken seeds"
	}
	fmt.Fprintf(&b, "Seeds %s; %s. Started %s, %s, lockpick %s.\n",
		joinSeeds(card.Seeds), policy, card.Started.UTC().Format(time.RFC3339), took, harnessVersion(card.Version, card.Revision))
	if len(card.Remedies) > 0 {
		b.WriteString("\n## Remedies\n\n")
		for _, r := range card.Remedies {
			fmt.Fprintf(&b, "- **%s**%s: %s", r.Row, card.inherent(r.Row), r.Remedy)
			if r.By != "" {
				fmt.Fprintf(&b, " (shown by row %s, which kept its promise)", r.By)
			}
			b.WriteString("\n")
		}
	}
	card.writeGroup(&b, GroupLock, "The lock's promise", "No two clients hold a key at once, and no lease ends before the deadline the lock promised. These rows decide the exit code.")
	card.writeGroup(&b, GroupInherent, "What the application must add", "A lease cannot stop a holder that was paused past it from writing late: breaking here is inherent to leases, and the last column says what the application must add.")
	card.writeGroup(&b, GroupRemedy, "Remedies tried", "Each changes one thing about a row above.")
	card.writeSkipped(&b)
	card.writeRuns(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// inherent marks a row whose breaking is inherent to leases.
func (card *LibraryCard) inherent(id string) string {
	for _, row := range card.Rows {
		if row.ID == id && row.Group == GroupInherent {
			return " (inherent to leases: the application must add it)"
		}
	}
	return ""
}

func (card *LibraryCard) title() string {
	if len(card.Program) > 0 {
		return strings.Join(card.Program, " ")
	}
	return card.Lock
}

// identity says who wrote the lock and what it declares.
func (card *LibraryCard) identity() string {
	lib := "library unknown"
	if l := card.Library; l.Name != "" {
		lib = "library " + l.Name
		if l.Version != "" {
			lib += " " + l.Version
		}
		if l.Module != "" && l.Module != l.Name {
			lib += " [" + l.Module + "]"
		}
		if l.Source != "" {
			lib += " (" + l.Source + ")"
		}
	}
	return fmt.Sprintf("Lock `%s`, %s; it declares: %s", card.Lock, lib, card.Declares)
}

func (card *LibraryCard) writeGroup(b *strings.Builder, group, title, about string) {
	var rows []*CardRow
	for _, row := range card.Rows {
		if row.Group == group && row.Skipped == "" {
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## %s\n\n%s\n\n", title, about)
	last := "run of the first break"
	switch group {
	case GroupInherent:
		last = "the application must add"
	case GroupRemedy:
		last = "remedy for"
	}
	fmt.Fprintf(b, "| row | what it does to the lock | verdict | first finding | seeds broken / run | time to first finding | %s |\n|---|---|---|---|---|---|---|\n", last)
	for _, row := range rows {
		v := row.Verdict()
		if group == GroupInherent && v == Broke {
			v = "broke it, as any lease does"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", row.ID, row.What, v, row.findingCell(), row.seedsCell(), row.timeCell(), row.lastCell(group))
	}
}

func (row *CardRow) findingCell() string {
	if r := row.FirstBroken(); r != nil {
		words, _ := r.Finding()
		return mdCell(words)
	}
	for _, r := range row.Runs {
		switch {
		case r.Error != "":
			return "could not run: " + mdCell(r.Error)
		case r.Unknown != "":
			return mdCell(r.Unknown)
		}
	}
	return "—"
}

func (row *CardRow) seedsCell() string {
	s := fmt.Sprintf("%d / %d", row.Broken(), len(row.Runs))
	if row.NotRun > 0 {
		s += fmt.Sprintf(" (%d not run: broken already)", row.NotRun)
	}
	return s
}

// timeCell is the time to the first finding: the first broken seed's, or with two or more broken
// seeds their median and each seed's, so that "found within 60 s" can be read off the card.
func (row *CardRow) timeCell() string {
	var at []int64
	var each []string
	for _, r := range row.Runs {
		if r.Error == "" && r.Verdict == checker.Invalid.String() && r.First != nil {
			at = append(at, r.First.At)
			each = append(each, fmt.Sprintf("%d: %s", r.Seed, checker.FormatTime(r.First.At)))
		}
	}
	switch {
	case len(at) == 0 && row.FirstBroken() != nil:
		_, t := row.FirstBroken().Finding()
		return t
	case len(at) == 0:
		return "—"
	case len(at) == 1:
		return checker.FormatTime(at[0])
	}
	return fmt.Sprintf("median %s (seed %s)", checker.FormatTime(median(at)), strings.Join(each, "; "))
}

// median is the middle of ds, or the mean of the two middle ones.
func median(ds []int64) int64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func (row *CardRow) lastCell(group string) string {
	switch group {
	case GroupInherent:
		return row.Must
	case GroupRemedy:
		return row.Remedies
	}
	if r := row.FirstBroken(); r != nil {
		return r.Dir
	}
	return "—"
}

// mdCell keeps text inside one table cell.
func mdCell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}

func (card *LibraryCard) writeSkipped(b *strings.Builder) {
	header := false
	for _, row := range card.Rows {
		if row.Skipped == "" {
			continue
		}
		if !header {
			b.WriteString("\n## Skipped\n\n")
			header = true
		}
		fmt.Fprintf(b, "- %s (%s): %s\n", row.ID, row.What, row.Skipped)
	}
}

func (card *LibraryCard) writeRuns(b *strings.Builder) {
	b.WriteString("\n## Runs\n\n")
	for _, row := range card.Rows {
		for _, r := range row.Runs {
			switch {
			case r.Error != "":
				fmt.Fprintf(b, "- %s seed %d: could not run: %s\n", row.ID, r.Seed, r.Error)
			default:
				early := ""
				if r.StoppedEarly {
					early = ", stopped at its first violation"
				}
				took := ""
				if r.Took > 0 {
					took = ", " + time.Duration(r.Took).Round(time.Second).String()
				}
				fmt.Fprintf(b, "- %s seed %d: %s, %d grants%s%s — %s\n", row.ID, r.Seed, r.Verdict, r.Grants, took, early, r.Dir)
			}
		}
	}
}

func joinSeeds(seeds []uint64) string {
	s := make([]string, len(seeds))
	for i, v := range seeds {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}
