package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/checker"
)

func keptRun(seed uint64) *CardRun {
	return &CardRun{Seed: seed, Verdict: "valid", Grants: 40, Dir: "card-x-row/1"}
}

func brokenRun(seed uint64, kind string) *CardRun {
	return &CardRun{Seed: seed, Verdict: "invalid", Grants: 30, Dir: "card-x-restart/2",
		First: &checker.FirstFinding{Kind: kind, At: 4e9, Description: "p2 and p0 | both held lockpick:1"}}
}

// A row's verdict is about the lock: broken by any seed, not judged when a run was unknown, kept
// only when every run kept it.
func TestCardRowVerdict(t *testing.T) {
	cases := []struct {
		row  CardRow
		want string
	}{
		{CardRow{Runs: []*CardRun{keptRun(1), keptRun(2)}}, Kept},
		{CardRow{Runs: []*CardRun{keptRun(1), brokenRun(2, checker.FindingViolation)}}, Broke},
		{CardRow{Runs: []*CardRun{keptRun(1), {Seed: 2, Verdict: "unknown", Unknown: "too few grants"}}}, NotJudged},
		{CardRow{Runs: []*CardRun{{Seed: 1, Error: "no redis-server"}, {Seed: 2, Verdict: "unknown"}}}, NotRun},
		{CardRow{Skipped: "no extend"}, SkippedRow},
		{CardRow{}, NotJudged},
	}
	for i, c := range cases {
		if got := c.row.Verdict(); got != c.want {
			t.Errorf("case %d: %s, want %s", i, got, c.want)
		}
	}
}

// The headline names the lock rows broken, and each gets the remedy a row of the card proved, or
// what the application must add; inherent and remedy rows never enter the headline.
func TestCardHeadlineAndRemedies(t *testing.T) {
	card := &LibraryCard{Lock: "single", Seeds: []uint64{1, 2, 3}, Rows: []*CardRow{
		{ID: "deadline", Group: GroupLock, Runs: []*CardRun{keptRun(1)}},
		{ID: "restart", Group: GroupLock, Runs: []*CardRun{brokenRun(1, checker.FindingViolation)}, NotRun: 2},
		{ID: "restart-delayed", Group: GroupLock, Remedies: "restart", Remedy: "restart no sooner than the TTL", Runs: []*CardRun{keptRun(1)}},
		{ID: "clock-forward", Group: GroupLock, Runs: []*CardRun{brokenRun(1, checker.FindingEarlyLoss)}},
		{ID: "counter-unguarded", Group: GroupInherent, Must: "fencing tokens", Runs: []*CardRun{brokenRun(1, checker.FindingStaleWrite)}},
		{ID: "counter-cas", Group: GroupRemedy, Remedies: "counter-unguarded", Remedy: "check-and-set", Runs: []*CardRun{keptRun(1)}},
		{ID: "restart-aof-always", Group: GroupRemedy, Remedies: "restart", Remedy: "aof always", Runs: []*CardRun{brokenRun(1, checker.FindingViolation)}},
		{ID: "reentry", Group: GroupLock, Skipped: "the lock is not reentrant"},
	}}
	card.Judge()
	if card.Headline != "UNSAFE under: restart, clock-forward" {
		t.Errorf("headline %q", card.Headline)
	}
	want := map[string]string{"restart": "restart-delayed", "clock-forward": "", "counter-unguarded": "counter-cas"}
	if len(card.Remedies) != len(want) {
		t.Errorf("remedies: %+v", card.Remedies)
	}
	for _, r := range card.Remedies {
		if by, ok := want[r.Row]; !ok || by != r.By {
			t.Errorf("remedy %+v, want it by %q", r, by)
		}
	}
	dir := t.TempDir()
	if err := WriteLibraryCard(dir, card); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, LibraryCardMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, s := range []string{
		"**UNSAFE under: restart, clock-forward**",
		"- **restart**: restart no sooner than the TTL (shown by row restart-delayed, which kept its promise)",
		"- **clock-forward**: no remedy shown by this card",
		"| restart |  | broke its promise | two holders: p2 and p0 \\| both held lockpick:1 | 1 / 1 (2 not run: broken already) | 4.000s | card-x-restart/2 |",
		"## What the application must add", "| counter-unguarded |  | broke it, as any lease does | stale write accepted", "- **counter-unguarded** (inherent to leases: the application must add it): check-and-set (shown by row counter-cas",
		"## Remedies tried", "## Skipped", "- reentry (): the lock is not reentrant",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("card lacks %q:\n%s", s, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, LibraryCardJSON)); err != nil {
		t.Errorf("no card.json: %v", err)
	}
}

// A lock that breaks with no fault gets no remedy, only the ones rows proved.
func TestCardNoRemedyForABug(t *testing.T) {
	card := &LibraryCard{Rows: []*CardRow{
		{ID: "deadline", Group: GroupLock, Nemesis: "none", Plain: true, Runs: []*CardRun{brokenRun(1, checker.FindingViolation)}},
		{ID: "restart", Group: GroupLock, Nemesis: "restart", Runs: []*CardRun{brokenRun(1, checker.FindingViolation)}},
		{ID: "counter-unguarded", Group: GroupInherent, Runs: []*CardRun{brokenRun(1, checker.FindingStaleWrite)}},
		{ID: "counter-cas", Group: GroupRemedy, Remedies: "counter-unguarded", Remedy: "check-and-set", Runs: []*CardRun{keptRun(1)}},
	}}
	card.Judge()
	if len(card.Remedies) != 2 || card.Remedies[0].Row != "deadline" || !strings.Contains(card.Remedies[0].Remedy, "no fault") || card.Remedies[1].By != "counter-cas" {
		t.Errorf("remedies %+v", card.Remedies)
	}
}

// A lock that kept its promise everywhere is SAFE; one that could not be judged is not called safe.
func TestCardHeadlineSafeAndNotJudged(t *testing.T) {
	card := &LibraryCard{Rows: []*CardRow{{ID: "deadline", Group: GroupLock, Runs: []*CardRun{keptRun(1)}},
		{ID: "counter-unguarded", Group: GroupInherent, Runs: []*CardRun{brokenRun(1, checker.FindingStaleWrite)}}}}
	card.Judge()
	if card.Headline != "SAFE under every row" {
		t.Errorf("headline %q", card.Headline)
	}
	card.Rows = append(card.Rows, &CardRow{ID: "drift", Group: GroupLock, Runs: []*CardRun{{Seed: 1, Verdict: "unknown"}}})
	card.Judge()
	if !strings.HasPrefix(card.Headline, "NOT JUDGED under: drift") {
		t.Errorf("headline %q", card.Headline)
	}
}

// With --all-seeds a broken row shows in how many seeds it broke and the median time to its first
// finding, each seed's time beside it; the header says every seed ran.
func TestCardAllSeedsShowsKOfNAndMedian(t *testing.T) {
	at := func(r *CardRun, s float64) *CardRun { r.First.At = int64(s * 1e9); return r }
	row := &CardRow{ID: "client-pause", Group: GroupLock, Runs: []*CardRun{
		at(brokenRun(1, checker.FindingViolation), 3), keptRun(2), at(brokenRun(3, checker.FindingViolation), 9),
		at(brokenRun(4, checker.FindingViolation), 1), at(brokenRun(5, checker.FindingViolation), 5)}}
	if got := row.seedsCell(); got != "4 / 5" {
		t.Errorf("seeds cell %q, want 4 / 5", got)
	}
	if got, want := row.timeCell(), "median 4.000s (seed 1: 3.000s; 3: 9.000s; 4: 1.000s; 5: 5.000s)"; got != want {
		t.Errorf("time cell %q, want %q", got, want)
	}
	one := &CardRow{Runs: []*CardRun{keptRun(1), at(brokenRun(2, checker.FindingViolation), 2)}}
	if got := one.timeCell(); got != "2.000s" {
		t.Errorf("one broken seed: time cell %q", got)
	}
	card := &LibraryCard{Lock: "go-zk", Seeds: []uint64{1, 2, 3, 4, 5}, AllSeeds: true, Rows: []*CardRow{row}}
	card.Judge()
	var b strings.Builder
	if err := card.Markdown(&b); err != nil {
		t.Fatal(err)
	}
	if md := b.String(); !strings.Contains(md, "every row runs every seed") || strings.Contains(md, "runs no more seeds") || !strings.Contains(md, "| 4 / 5 |") {
		t.Errorf("card:\n%s", md)
	}
}
