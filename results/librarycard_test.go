package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/checker"
)

// The card says per row how many seeds met the expectation, the median time to the first finding,
// and where the library broke its promise, with the run that shows it.
func TestLibraryCardShowsRowsAndBrokenPromises(t *testing.T) {
	dir := t.TempDir()
	first := func(at int64) *checker.FirstFinding {
		return &checker.FirstFinding{Kind: checker.FindingStaleWrite, At: at, Description: "p6 wrote 655 after its lease ended"}
	}
	card := &LibraryCard{Library: "etcd", Seeds: []uint64{1, 2, 3}, Rows: []*CardRow{
		{Scenario: "etcd-none", Why: "no faults", Nemesis: "none", Expected: "valid", Runs: []*CardRun{
			{Seed: 2, Verdict: "valid", Grants: 40, Promised: checker.Latency{Count: 40, P50: 1990}, Server: "etcd 3.4.23"},
			{Seed: 1, Verdict: "valid", Grants: 41, Promised: checker.Latency{Count: 41, P50: 1995}, Server: "etcd 3.4.23"},
			{Seed: 3, Verdict: "invalid", Missed: []string{"verdict invalid"}, First: &checker.FirstFinding{Kind: "violation", At: 5e9}},
		}},
		{Scenario: "etcd-client-pause", Why: "Jepsen", Nemesis: "client-pause", Expected: "invalid", ExpectInvalid: true, Runs: []*CardRun{
			{Seed: 1, Verdict: "invalid", First: first(3e9), Dir: "/s/run1"},
			{Seed: 2, Verdict: "invalid", First: first(7e9), Dir: "/s/run2"},
			{Seed: 3, Verdict: "valid", Missed: []string{"verdict valid"}},
		}},
	}}
	if err := WriteLibraryCard(dir, card); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, LibraryCardMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"# Report card: etcd", "server etcd 3.4.23",
		"| etcd-none | `none` | valid | 1/3 invalid, 2/3 valid | 2/3 |",
		"| etcd-client-pause | `client-pause` | invalid | 2/3 invalid, 1/3 valid | 2/3 | 7.000s in 2/3 (3.000s, 7.000s, —)",
		"1995 ms",
		"**etcd-client-pause** (Jepsen), seed 1, stale-write at 3.000s: p6 wrote 655 after its lease ended\n  run: /s/run1",
		"- etcd-client-pause seed 3: valid, NOT MET: verdict valid",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("card lacks %q:\n%s", want, md)
		}
	}
	if card.Rows[0].Runs[0].Seed != 1 {
		t.Errorf("runs are not in seed order: %+v", card.Rows[0].Runs)
	}
	if _, err := os.Stat(filepath.Join(dir, LibraryCardJSON)); err != nil {
		t.Errorf("no card.json: %v", err)
	}
}
