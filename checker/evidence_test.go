package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// planned starts a history with the run's invoke and its plan: keys, nemeses, and time_limit +
// recovery of 10s.
func planned(keys []string, nemeses ...string) *hist {
	h := &hist{}
	return h.add(history.Event{Type: history.Invoke, Process: history.HarnessProcess, F: history.FRun, Plan: &history.Plan{
		Lock: "single", Workload: "mutex", Keys: keys, Clients: 3, TTL: int64(time.Second),
		TimeLimit: int64(8 * time.Second), Recovery: int64(2 * time.Second), Nemeses: nemeses, Seed: 1,
	}})
}

// end completes the run at ms with typ (ok, or info with why).
func (h *hist) end(at int64, typ history.Type, why string) *hist {
	return h.add(history.Event{Time: at, Type: typ, Process: history.HarnessProcess, F: history.FRun, Error: why})
}

// held adds an acquire of key by p at ms t, held 100ms and released.
func (h *hist) held(p int, key string, t int64) *hist {
	v := key + "-" + string(rune('a'+p))
	return h.acquire(p, key, t, t+5, history.OK, v, t+1000).release(p, key, v, t+100, t+105)
}

func TestEvidence(t *testing.T) {
	restart := func(h *hist, at int64, err string) *hist {
		h.add(history.Event{Time: at, Type: history.Invoke, Process: -1, F: "kill", Fault: "restart", Effect: history.EffectFault, Nodes: []string{"n1"}})
		return h.add(history.Event{Time: at + 5, Type: history.Info, Process: -1, F: "kill", Fault: "restart", Effect: history.EffectFault, Nodes: []string{"n1"}, Error: err})
	}
	cases := []struct {
		name   string
		h      *hist
		want   Verdict
		reason string
	}{
		{"all there", restart(planned([]string{"k", "j"}, "restart").held(0, "k", 100).held(1, "j", 300), 500, "").end(10000, history.OK, ""), Valid, ""},
		{"restart-delayed counts for restart", planned([]string{"k"}, "restart:delay=3s").held(0, "k", 100).
			add(history.Event{Time: 500, Type: history.Invoke, Process: -1, F: "kill", Fault: "restart-delayed", Effect: history.EffectFault}).
			add(history.Event{Time: 505, Type: history.Info, Process: -1, F: "kill", Fault: "restart-delayed", Effect: history.EffectFault}).
			end(10000, history.OK, ""), Valid, ""},
		{"no grant on a key", planned([]string{"k", "j"}).held(0, "k", 100).
			acquire(1, "j", 200, 300, history.Info, "", 0).acquire(2, "j", 400, 500, history.Info, "", 0).
			acquire(3, "j", 600, 610, history.Fail, "", 0).end(10000, history.OK, ""),
			Unknown, "no lock was granted on key j in 10.0s: 66% of 3 acquires timed out; raise --node-timeout or lower --clients"},
		{"key never asked for", planned([]string{"k", "j"}).held(0, "k", 100).end(10000, history.OK, ""),
			Unknown, "no client asked for key j in 10.0s: raise --clients to at least --keys, or --time-limit"},
		{"nemesis never applied", planned([]string{"k"}, "restart").held(0, "k", 100).end(10000, history.OK, ""),
			Unknown, "the planned nemesis restart applied no fault in 10.0s: raise --time-limit well above its --interval"},
		{"nemesis always failed", restart(planned([]string{"k"}, "restart").held(0, "k", 100), 500, "connection refused").end(10000, history.OK, ""),
			Unknown, "the planned nemesis restart tried 1 faults in 10.0s and none took effect without an error (last: connection refused)"},
		{"interrupted", planned([]string{"k"}).held(0, "k", 100).end(3500, history.Info, "interrupted"),
			Unknown, "the run was cut short at 3.5s of 10.0s (interrupted): re-run it without interrupting it"},
		{"killed", planned([]string{"k"}).held(0, "k", 100).held(0, "k", 3000),
			Unknown, "the run was killed at 3.1s of 10.0s (its history has no end): re-run it and let it finish"},
		{"killed at the very end", planned([]string{"k"}).held(0, "k", 100).held(0, "k", 9850), Valid, ""},
		{"interrupted after the plan ran", planned([]string{"k"}).held(0, "k", 100).end(10050, history.Info, "interrupted"), Valid, ""},
		{"violation with little evidence", planned([]string{"k", "j"}, "restart").
			acquire(0, "k", 100, 110, history.OK, "a", 5000).acquire(1, "k", 120, 130, history.OK, "b", 5000).end(2000, history.Info, "interrupted"),
			Invalid, ""},
		{"no plan", (&hist{}).held(0, "k", 100), Valid, ""},
		{"all expired on arrival", (&hist{}).acquire(0, "k", 0, 50, history.OK, "a", 40),
			Unknown, "no lock was granted on key k in 0.1s: all 1 ok acquires arrived after their lease had expired; raise --ttl or lower --node-timeout"},
		{"failed without a reason", (&hist{}).acquire(0, "k", 0, 50, history.Info, "", 0).
			acquire(1, "k", 60, 70, history.Fail, "", 0).acquire(2, "k", 80, 90, history.Fail, "", 0),
			Unknown, "no lock was granted on key k in 0.1s: 66% of 3 acquires failed with an error (nodes unreachable or no quorum); see lockpick.log, or choose a milder --nemesis"},
		{"held by a ghost", (&hist{}).acquire(0, "k", 0, 50, history.Info, "", 0).
			add(history.Event{Time: 60, Type: history.Invoke, Process: 1, F: history.FAcquire, Key: "k"}).
			add(history.Event{Time: 70, Type: history.Fail, Process: 1, F: history.FAcquire, Key: "k", Reason: history.ReasonHeld}).
			add(history.Event{Time: 80, Type: history.Invoke, Process: 1, F: history.FAcquire, Key: "k"}).
			add(history.Event{Time: 90, Type: history.Fail, Process: 1, F: history.FAcquire, Key: "k", Reason: history.ReasonHeld}),
			Unknown, "no lock was granted on key k in 0.1s: 66% of 3 acquires found it held, by a client whose own acquire never came back; raise --node-timeout"},
	}
	for _, c := range cases {
		r := mustCheck(t, c.h.events())
		if r.Valid != c.want || !strings.HasPrefix(r.UnknownReason, c.reason) || (c.reason == "") != (r.UnknownReason == "") {
			t.Errorf("%s: got %s because %q, want %s because %q\n%s", c.name, r.Valid, r.UnknownReason, c.want, c.reason, r.Summary())
		}
		if r.Valid == Unknown && !strings.Contains(r.Summary(), "unknown because "+c.reason) {
			t.Errorf("%s: the summary does not give the reason:\n%s", c.name, r.Summary())
		}
	}
}

// A failure because another client held the lock is contention, not an error: the reason decides.
func TestHeldIsNotAnError(t *testing.T) {
	h := planned([]string{"k"}).held(0, "k", 100)
	h.add(history.Event{Time: 110, Type: history.Invoke, Process: 1, F: history.FAcquire, Key: "k"})
	h.add(history.Event{Time: 111, Type: history.Fail, Process: 1, F: history.FAcquire, Key: "k", Reason: history.ReasonHeld})
	h.add(history.Event{Time: 120, Type: history.Invoke, Process: 1, F: history.FAcquire, Key: "k"})
	h.add(history.Event{Time: 121, Type: history.Fail, Process: 1, F: history.FAcquire, Key: "k", Reason: history.ReasonError})
	h.acquire(2, "k", 130, 140, history.Info, "", 0).end(1000, history.OK, "")
	r := mustCheck(t, h.events())
	s := r.Stats
	if s.Acquires.Held != 1 || s.Acquires.Fail != 2 || s.AcquiresByKey["k"].Held != 1 {
		t.Errorf("counts %+v, by key %+v", s.Acquires, s.AcquiresByKey)
	}
	// 4 completed acquires: 1 ok, 1 held, 1 error, 1 timeout -> error share 2/4.
	if s.ErrorShare != 0.5 {
		t.Errorf("error share %v, want 0.5", s.ErrorShare)
	}
	// One hold of 95ms (105ms completion to 200ms release invoke) in a run of 1s.
	if s.HeldShare < 0.0949 || s.HeldShare > 0.0951 || s.GrantsPerSecond != 1 {
		t.Errorf("held share %v, grants/s %v; want 0.095 and 1", s.HeldShare, s.GrantsPerSecond)
	}
	for _, want := range []string{"1 ok, 1 refused because held, 1 failed with an error, 1 timed out", "held: 9.5% of the time", "1.00 grants/s", "error share 50.0%"} {
		if !strings.Contains(r.Summary(), want) {
			t.Errorf("summary lacks %q:\n%s", want, r.Summary())
		}
	}
}

// The held share is the union of the holds of a key, averaged over the keys: overlapping holds (a
// violation) do not count twice, and a key nobody held counts as zero.
func TestHeldShare(t *testing.T) {
	h := planned([]string{"k", "j"}).
		acquire(0, "k", 0, 100, history.OK, "a", 5000).release(0, "k", "a", 300, 310).
		acquire(1, "k", 150, 200, history.OK, "b", 5000).release(1, "k", "b", 400, 410).
		end(1000, history.OK, "")
	r := mustCheck(t, h.events())
	if got := r.Stats.HeldShare; got < 0.1499 || got > 0.1501 {
		t.Errorf("held share %v, want (300ms of 1s on k + 0 on j) / 2 = 0.15", got)
	}
}

func TestEvidenceInSummaryAndJSON(t *testing.T) {
	r := mustCheck(t, planned([]string{"k"}, "restart").held(0, "k", 100).end(3000, history.Info, "interrupted").events())
	for _, want := range []string{"(a) at least 1 grant on every key: yes, 1 of 1 keys", "(b) nemesis restart applied 0 of 0 faults", "(c) planned time ran: no, covered 3.0s of 10.0s (the run was cut short)"} {
		if !strings.Contains(r.Summary(), want) {
			t.Errorf("summary lacks %q:\n%s", want, r.Summary())
		}
	}
	if r.Evidence.Enough || r.Evidence.Ended != "info" || r.Evidence.EndError != "interrupted" || r.Evidence.Covered != 3000*ms || r.Evidence.Planned != 10000*ms {
		t.Errorf("evidence %+v", r.Evidence)
	}
	r = mustCheck(t, (&hist{}).held(0, "k", 100).events())
	if !strings.Contains(r.Summary(), "not judged, the history has no plan") || !containsSubstring(r.Notes, "no run plan") {
		t.Errorf("a history without a plan must say what was not judged:\n%s", r.Summary())
	}
}
