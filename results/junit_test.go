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
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
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
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
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

// A suite's time is its wall time when it has one (a matrix runs cells side by side), else the sum
// of its cases; a matrix cell's time is its runs'.
func TestJUnitSuiteTime(t *testing.T) {
	read := func(path string) JUnitSuite {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var s JUnitSuite
		if err := xml.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	cell := CellCase(&Cell{Lock: "single", Nemesis: "none", Runs: []*CellRun{
		{Seed: 1, Verdict: "valid", Took: Duration(3 * time.Second)}, {Seed: 2, Verdict: "valid", Took: Duration(4 * time.Second)}}})
	if cell.Time != 7 {
		t.Errorf("cell time %v, want 7 (its runs')", cell.Time)
	}
	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := WriteJUnit(path, JUnitSuite{Name: "m", Time: 4.5, Cases: []JUnitCase{cell, cell}}); err != nil {
		t.Fatal(err)
	}
	if got := read(path).Time; got != 4.5 {
		t.Errorf("suite time %v, want its own 4.5", got)
	}
	if err := WriteJUnit(path, JUnitSuite{Name: "m", Cases: []JUnitCase{cell, cell}}); err != nil {
		t.Fatal(err)
	}
	if got := read(path).Time; got != 14 {
		t.Errorf("suite time %v, want the sum 14", got)
	}
}

// The matrix card names its measures once: findings, held, acquires ok; never "availability" or a
// count of violations that reads 0 on a run invalid by something else.
func TestMatrixCardWords(t *testing.T) {
	r := &checker.Result{Valid: checker.Invalid, EarlyLossCount: 1, FirstFinding: &checker.FirstFinding{Kind: checker.FindingEarlyLoss, At: 2e9}}
	r.Stats.HeldShare, r.Stats.AcquiresOKShare = 0.989, 0.016
	run := NewCellRun(1, "single-clock/1", r)
	if got := run.Words(); got != "invalid: 1 early lease loss" {
		t.Errorf("run words %q", got)
	}
	card := &Card{Cells: []*Cell{{Lock: "single", Nemesis: "clock", Runs: []*CellRun{run}}}}
	var b strings.Builder
	if err := card.Markdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"| findings | first finding | held | acquires ok |", "| 1 early lease loss | 2.000s (early lease loss) | 98.9% | 1.6% |", "seed 1: invalid: 1 early lease loss"} {
		if !strings.Contains(md, want) {
			t.Errorf("card lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(strings.ToLower(md), "availability") {
		t.Errorf("card says availability:\n%s", md)
	}
}
