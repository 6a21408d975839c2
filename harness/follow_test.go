package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/results"
)

// A run checks its history while it records it (results.FollowTap: the events as the recorder
// writes them, see history.Tap); `lockpick check DIR` afterwards, decoding the file,
// must give the same verdict, results and report, on a run with faults and violations.
func TestRunCheckedAsItRecordsMatchesRecheck(t *testing.T) {
	t.Parallel()
	cfg := Config{
		Lock: "single", Nemesis: "restart:target=holder", Clients: 6, Keys: 1, Seed: 3,
		HoldMax: Duration(800 * time.Millisecond), Store: t.TempDir(),
		TTL: Duration(time.Second), TimeLimit: Duration(5 * time.Second), Recovery: Duration(time.Second),
		Interval: Duration(1500 * time.Millisecond),
	}
	out, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Result.Valid != checker.Invalid || len(out.Result.Faults) == 0 {
		t.Fatalf("want an invalid run with faults to compare, got %v with %d fault windows", out.Result.Valid, len(out.Result.Faults))
	}
	during := written(t, out.Dir)
	c, err := results.CheckRun(out.Dir, checkOptions(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(results.RunInfo{Dir: out.Dir, Library: out.Library}); err != nil {
		t.Fatal(err)
	}
	after := written(t, out.Dir)
	for name, got := range during {
		if got != after[name] {
			t.Errorf("%s written by the run differs from the one checked afterwards:\n%.600s\n%.600s", name, got, after[name])
		}
	}
	out.Result.CheckDuration, c.Result.CheckDuration = 0, 0
	a, _ := json.Marshal(out.Result)
	b, _ := json.Marshal(c.Result)
	if string(a) != string(b) {
		t.Errorf("the run's result differs from the re-check's:\n%.600s\n%.600s", a, b)
	}
}

var checkedIn = regexp.MustCompile(`checked in [0-9.]+[mµn]?s|"check_duration": [0-9]+`)

// written is what a run directory's results say, timings left out.
func written(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range []string{results.SummaryFile, results.ReportFile, results.ResultsFile} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		out[f] = checkedIn.ReplaceAllString(string(b), "")
	}
	return out
}
