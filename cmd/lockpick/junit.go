package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/results"
)

// junitFlag registers --junit on cmd and returns where its value lands.
func junitFlag(cmd *cobra.Command, what string) *string {
	p := new(string)
	cmd.Flags().StringVar(p, "junit", "", "write a JUnit XML report to FILE: one test case per "+what+", the violation summary as the failure text")
	return p
}

// junitReport collects test cases for --junit; a nil *junitReport (no --junit) ignores them.
type junitReport struct {
	path  string
	began time.Time // the suite's time is its wall time from here: runs side by side overlap

	mu    sync.Mutex // runs side by side add cases
	suite results.JUnitSuite
}

func newJUnit(path, suite string) *junitReport {
	if path == "" {
		return nil
	}
	now := time.Now()
	return &junitReport{path: path, began: now, suite: results.JUnitSuite{Name: suite, Timestamp: now.UTC().Format(time.RFC3339)}}
}

func (j *junitReport) add(c results.JUnitCase) {
	if j != nil {
		j.mu.Lock()
		defer j.mu.Unlock()
		j.suite.Cases = append(j.suite.Cases, c)
	}
}

// write (re)writes the file with the cases so far.
func (j *junitReport) write() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.suite.Time = time.Since(j.began).Seconds()
	return results.WriteJUnit(j.path, j.suite)
}

// addRun adds one run of `lockpick run`: its outcome, or the error that stopped it.
func (j *junitReport) addRun(cfg harness.Config, out *harness.Outcome, err error, took time.Duration) {
	name := fmt.Sprintf("%s under %s, seed %d", cfg.Lock, cfg.Nemesis, cfg.Seed)
	if err != nil {
		j.add(results.ErrorCase("lockpick.run", name, err, took))
		return
	}
	j.add(results.RunCase("lockpick.run."+cfg.Lock, name, out.Dir, out.Result, took))
}

// setCells replaces the cases with one per matrix cell that has run (a matrix rewrites the file
// after every run, so an interrupted one keeps what it did).
func (j *junitReport) setCells(cells []*results.Cell) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.suite.Cases = nil
	for _, c := range cells {
		if len(c.Runs) > 0 {
			j.suite.Cases = append(j.suite.Cases, results.CellCase(c))
		}
	}
}
