package main

import (
	"testing"
	"time"

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

// Side by side, a run that stops at its first violation is scheduled by the time it takes, not by
// its plan: the 60 s runs that go whole start before it.
func TestLongRunsStartFirst(t *testing.T) {
	whole, err := scenarios.Find("redlock-none") // valid: 60 s + 5 s, run whole
	if err != nil {
		t.Fatal(err)
	}
	early, err := scenarios.Find("redlock-restart") // invalid: stops at its first violation
	if err != nil {
		t.Fatal(err)
	}
	o := scenarioOverrides{stopAtFirst: true}
	if got, want := o.expectedLength(whole), 65*time.Second; got != want {
		t.Errorf("redlock-none expected to take %v, want its plan %v", got, want)
	}
	if got := o.expectedLength(early); got != earlyStopLength {
		t.Errorf("redlock-restart with --stop-at-first expected to take %v, want %v", got, earlyStopLength)
	}
	if got := (scenarioOverrides{}).expectedLength(early); got != 65*time.Second {
		t.Errorf("redlock-restart without --stop-at-first expected to take %v, want its plan", got)
	}
}
