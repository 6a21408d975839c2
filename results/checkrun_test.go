package results

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/lockpick-dev/lockpick/checker"
)

// CheckRun gathers the report in the checker's own pass: its page is the one Write draws from a
// second reading of the history, timings aside.
func TestCheckRunReportsInOnePass(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	dir, _ := writeRun(t, &synth{clients: 10, duration: 20000 * ms, violation: true}, config(10))
	want := readReport(t, dir)
	c, err := CheckRun(dir, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Result.Valid != checker.Invalid {
		t.Fatalf("verdict %s, want invalid", c.Result.Valid)
	}
	if err := c.Write(RunInfo{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if got := readReport(t, dir); got != want {
		t.Errorf("report.html of CheckRun differs from Write's (%d and %d bytes)", len(got), len(want))
	}
}

var checkedIn = regexp.MustCompile(`checked in [0-9.]+m?s`)

func readReport(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	return checkedIn.ReplaceAllString(string(b), "")
}

// A small run's failed acquires are drawn one by one on their slot's lane (they were once dropped
// when not binned).
func TestTimelineDrawsEachFailedAcquire(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	s := &synth{clients: 10, duration: 5000 * ms}
	dir, res := writeRun(t, s, config(10))
	d, err := readRunData(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	tl := timelineData(res, d)
	if tl.Bin != 0 {
		t.Fatalf("bin %d: the run is too large for this test", tl.Bin)
	}
	drawn := 0
	for _, sl := range tl.Slots {
		drawn += len(sl.Fail) / 3
	}
	if want := res.Stats.Acquires.Fail; drawn != want || want == 0 {
		t.Errorf("%d failed acquires drawn, want each of the %d", drawn, want)
	}
}
