package results

import (
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
)

// An invalid run is a failing test case whose text is the violation summary; a valid one passes;
// an unknown verdict and a run that could not start are errors. The file is JUnit XML a CI reads.
func TestJUnitCasesFollowTheVerdict(t *testing.T) {
	dir, invalid := writeRun(t, &synth{clients: 10, duration: 8000 * ms, violation: true}, config(10))
	_, valid := writeRun(t, &synth{clients: 10, duration: 2000 * ms}, config(10))
	unknown := &checker.Result{Valid: checker.Unknown, Errors: []string{"checker disagreement: test"}}
	path := filepath.Join(t.TempDir(), "junit.xml")
	suite := JUnitSuite{Name: "lockpick run", Cases: []JUnitCase{
		RunCase("lockpick.run.single", "invalid run", dir, invalid, time.Second),
		RunCase("lockpick.run.single", "valid run", dir, valid, time.Second),
		RunCase("lockpick.run.single", "unknown run", dir, unknown, time.Second),
		ErrorCase("lockpick.run", "broken run", errors.New("redis-server not found"), 0),
	}}
	if err := WriteJUnit(path, suite); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got JUnitSuite
	if err := xml.Unmarshal(b, &got); err != nil {
		t.Fatalf("not XML: %v\n%s", err, b)
	}
	if got.Tests != 4 || got.Failures != 1 || got.Errors != 2 {
		t.Fatalf("tests %d failures %d errors %d, want 4, 1, 2", got.Tests, got.Failures, got.Errors)
	}
	f := got.Cases[0].Failure
	if f == nil || !strings.Contains(f.Message, invalid.Violations[0].Cause) || !strings.Contains(f.Text, invalid.Violations[0].Description) {
		t.Errorf("the failure does not carry the violation summary: %+v", f)
	}
	if got.Cases[1].Failure != nil || got.Cases[1].Error != nil {
		t.Error("a valid run is reported as failing")
	}
}

// A matrix cell fails when any seed is invalid, with each invalid run's summary.txt as the text.
func TestJUnitCellCase(t *testing.T) {
	dir, res := writeRun(t, &synth{clients: 10, duration: 8000 * ms, violation: true}, config(10))
	cell := &Cell{Lock: "single", Nemesis: "restart", Expected: "invalid", Runs: []*CellRun{
		NewCellRun(1, dir, res), {Seed: 2, Verdict: "valid", FirstViolation: -1, Dir: dir},
	}}
	c := CellCase(cell)
	if c.Failure == nil || !strings.Contains(c.Failure.Text, res.Violations[0].Description) || !strings.Contains(c.Failure.Message, "seed 1") {
		t.Fatalf("cell case: %+v", c.Failure)
	}
	pass := CellCase(&Cell{Lock: "single", Nemesis: "none", Runs: []*CellRun{{Seed: 1, Verdict: "valid", FirstViolation: -1}}})
	if pass.Failure != nil || pass.Error != nil {
		t.Fatal("a valid cell fails")
	}
}
