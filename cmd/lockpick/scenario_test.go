package main

import (
	"testing"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/scenarios"
)

// Only an expectation one violation settles lets a run stop at its first violation: never an
// expected-valid run, nor one that must also show data-level findings or no violations.
func TestOnlyAViolationAloneStopsEarly(t *testing.T) {
	for _, c := range []struct {
		e    scenarios.Expectation
		stop bool
	}{
		{scenarios.Expectation{Verdict: checker.Invalid}, true},
		{scenarios.Expectation{Verdict: checker.Invalid, Some: []string{"violations"}}, true},
		{scenarios.Expectation{Verdict: checker.Valid}, false},
		{scenarios.Expectation{Verdict: checker.Invalid, Some: []string{"violations", "lost_updates"}}, false},
		{scenarios.Expectation{Verdict: checker.Invalid, Some: []string{"deadlocks"}, None: []string{"violations"}}, false},
	} {
		if got := settledByAViolation(c.e); got != c.stop {
			t.Errorf("%s: stop early %v, want %v", c.e, got, c.stop)
		}
	}
}
