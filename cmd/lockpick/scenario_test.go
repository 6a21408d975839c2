package main

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/scenarios"
	"github.com/lockpick-dev/lockpick/systems"
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

// A remote Engine's docker backend slows the paths between servers too: `scenario --backend docker
// --docker-host tcp://...` keeps etcd-peer-latency, and still leaves out what it cannot run.
func TestOnRemoteBackendKeepsPeerLatency(t *testing.T) {
	if systems.RemoteNetToolsMissing() != nil {
		t.Skip("this host has no iptables to pack into a remote node image")
	}
	var all []scenarios.Scenario
	for _, name := range []string{"etcd-peer-latency", "etcd-partition-leader"} {
		s, err := scenarios.Load(filepath.Join("..", "..", "scenarios", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, s)
	}
	var out bytes.Buffer
	kept := onBackend(&out, all, scenarioOverrides{backend: systems.BackendDocker, dockerHost: "tcp://192.0.2.1:2375"})
	if len(kept) != 2 || out.Len() != 0 {
		t.Fatalf("on a remote Engine kept %d of 2, said %q", len(kept), out.String())
	}
}
