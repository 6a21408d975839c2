package main

import (
	"testing"

	"github.com/lockpick-dev/lockpick/results"
)

// A matrix exits as run and card do: invalid first, then a run that could not run, then unknown;
// 0 only when every run was valid (it once exited 0 with every cell invalid).
func TestMatrixExitCodeFollowsTheVerdicts(t *testing.T) {
	cell := func(verdicts ...string) *results.Cell {
		c := &results.Cell{Lock: "single", Nemesis: "restart"}
		for i, v := range verdicts {
			r := &results.CellRun{Seed: uint64(i + 1), Verdict: v}
			if v == "crashed" {
				r.Verdict, r.Error = "", "redis-server not found"
			}
			c.Runs = append(c.Runs, r)
		}
		return c
	}
	for _, c := range []struct {
		cells []*results.Cell
		want  int
	}{
		{[]*results.Cell{cell("valid", "valid"), cell("valid")}, 0},
		{[]*results.Cell{cell("invalid", "invalid"), cell("invalid")}, 1},
		{[]*results.Cell{cell("valid", "crashed"), cell("invalid")}, 1},
		{[]*results.Cell{cell("valid", "crashed"), cell("unknown")}, 255},
		{[]*results.Cell{cell("valid", "unknown")}, 2},
	} {
		if got := matrixExitCode(c.cells); got != c.want {
			t.Errorf("%v: exit %d, want %d", c.cells, got, c.want)
		}
	}
}
