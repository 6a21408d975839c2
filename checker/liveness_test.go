package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// refusedUntil adds acquires of key by p refused as held every 100ms from `from` to `until` (ms).
func (h *hist) refusedUntil(p int, key string, from, until int64) *hist {
	for t := from; t <= until; t += 100 {
		h.add(history.Event{Time: t, Type: history.Invoke, Process: p, F: history.FAcquire, Key: key})
		h.add(history.Event{Time: t + 1, Type: history.Fail, Process: p, F: history.FAcquire, Key: key, Reason: history.ReasonHeld})
	}
	return h
}

func (h *hist) crash(pid string, point string, at int64) *hist {
	h.add(history.Event{Time: at, Type: history.Invoke, Process: -1, F: "crash", Fault: FaultClientCrash, Effect: history.EffectFault, Nodes: []string{pid}, Value: point})
	return h.add(history.Event{Time: at + 1, Type: history.Info, Process: -1, F: "crash", Fault: FaultClientCrash, Effect: history.EffectFault, Nodes: []string{pid}})
}

// A key that no one holds but every acquire is refused as held, for far longer than a lease can
// outlive its holder after the last fault, is a deadlock: the run is invalid, and the finding names
// the crash.
func TestDeadlockAfterACrashBetweenSetnxAndExpire(t *testing.T) {
	h := planned([]string{"k"}, "client-crash:point=after-setnx").
		held(0, "k", 100).
		add(history.Event{Time: 400, Type: history.Invoke, Process: 1, F: history.FAcquire, Key: "k"}).
		add(history.Event{Time: 402, Type: history.Info, Process: 1, F: history.FAcquire, Key: "k", Error: "client crashed at after-setnx"}).
		crash("p1", "after-setnx", 401).
		refusedUntil(2, "k", 500, 9800).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if r.Liveness == nil || r.Liveness.Verdict != LiveDeadlock || len(r.Liveness.Findings) != 1 {
		t.Fatalf("liveness %+v: want one deadlock", r.Liveness)
	}
	if r.Valid != Invalid || r.ViolationCount != 0 {
		t.Fatalf("verdict %s with %d violations: a deadlock makes the run invalid, with no violation", r.Valid, r.ViolationCount)
	}
	if f := r.Liveness.Findings[0]; !strings.Contains(f.Description, "p1 crashed") || !strings.Contains(f.Description, "after-setnx") {
		t.Fatalf("finding %q does not name the crash", f.Description)
	}
	if !strings.Contains(r.Summary(), "liveness: DEADLOCK") {
		t.Fatalf("the summary has no liveness line:\n%s", r.Summary())
	}
}

// Refusals while a holder holds are contention, not a deadlock; and a recovery too short to tell
// leaves liveness unknown without touching the verdict.
func TestLivenessCountsOnlyTimeWithNoHolder(t *testing.T) {
	h := planned([]string{"k"}).
		acquire(0, "k", 0, 5, history.OK, "a", 0). // no deadline: a watchdog hold until release
		refusedUntil(1, "k", 10, 9000).
		release(0, "k", "a", 9100, 9105).
		acquire(1, "k", 9200, 9205, history.OK, "b", 0).
		release(1, "k", "b", 9300, 9305).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if r.Liveness.Verdict != LiveOK || r.Valid != Valid {
		t.Fatalf("liveness %+v, verdict %s: want ok and valid", r.Liveness, r.Valid)
	}
	h = planned([]string{"k"}).held(0, "k", 100).end(1500, history.OK, "")
	if r := mustCheck(t, h.events()); r.Liveness.Verdict != LiveUnknown || !strings.Contains(r.Liveness.Note, "--recovery") {
		t.Fatalf("liveness %+v: want unknown with the flag that fixes it", r.Liveness)
	}
}

// A crashed holder holds nothing: a watchdog lock's key outlives it by the watchdog timeout, and
// the next client's hold after that is no violation.
func TestCrashEndsTheHold(t *testing.T) {
	h := planned([]string{"k"}, "client-crash").
		acquire(0, "k", 0, 5, history.OK, "a", 0).
		crash("p0", "holding", 500).
		acquire(1, "k", 1600, 1605, history.OK, "b", 0).
		release(1, "k", "b", 1700, 1705).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if r.ViolationCount != 0 {
		t.Fatalf("%d violations: the crashed process's hold must end at the crash", r.ViolationCount)
	}
	// Without the crash, p0 holds until the end and p1's hold overlaps it.
	h = planned([]string{"k"}).
		acquire(0, "k", 0, 5, history.OK, "a", 0).
		acquire(1, "k", 1600, 1605, history.OK, "b", 0).
		release(1, "k", "b", 1700, 1705).
		end(10000, history.OK, "")
	if r := mustCheck(t, h.events()); r.ViolationCount != 1 {
		t.Fatalf("%d violations: an unreleased watchdog hold lasts to the end of the history", r.ViolationCount)
	}
}

// renewed moves a live hold's deadline (keepalive locks); lost ends it, early when before the
// deadline promised; both are news with no invoke, and may come while an operation is in flight.
func TestRenewedAndLostEvents(t *testing.T) {
	renewed := func(p int, key, value string, at, deadline int64) history.Event {
		return history.Event{Time: at, Type: history.Info, Process: p, F: history.FRenewed, Key: key, Value: value, Deadline: deadline}
	}
	h := planned([]string{"k"}).
		acquire(0, "k", 0, 5, history.OK, "a", 1000).
		add(renewed(0, "k", "a", 600, 1600)).
		acquire(1, "k", 1100, 1200, history.OK, "b", 3000).
		release(0, "k", "a", 1500, 1510).
		release(1, "k", "b", 2000, 2010).
		end(10000, history.OK, "")
	if r := mustCheck(t, h.events()); r.ViolationCount != 1 || r.Stats.Renewals != 1 {
		t.Fatalf("%d violations, %d renewals: the renewal keeps p0's hold past p1's grant", r.ViolationCount, r.Stats.Renewals)
	}
	h = planned([]string{"k"}).
		acquire(0, "k", 0, 5, history.OK, "a", 1000).
		add(history.Event{Time: 300, Type: history.Invoke, Process: 0, F: history.FWork, Key: "k", Value: "a"}).
		add(history.Event{Time: 400, Type: history.Info, Process: 0, F: history.FLost, Key: "k", Value: "a"}).
		add(history.Event{Time: 450, Type: history.OK, Process: 0, F: history.FWork, Key: "k", Value: "a"}).
		acquire(1, "k", 500, 505, history.OK, "b", 3000).
		release(0, "k", "a", 700, 710).
		release(1, "k", "b", 2000, 2010).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if r.ViolationCount != 0 || r.EarlyLossCount != 1 || r.Valid != Invalid {
		t.Fatalf("%d violations, %d early losses, %s: a loss reported before the deadline ends the hold and is an early loss", r.ViolationCount, r.EarlyLossCount, r.Valid)
	}
}

func TestLeaseNewsIsValidated(t *testing.T) {
	for name, e := range map[string]history.Event{
		"invoke":        {Type: history.Invoke, Process: 0, F: history.FRenewed, Key: "k"},
		"no key":        {Type: history.Info, Process: 0, F: history.FRenewed},
		"lost deadline": {Type: history.Info, Process: 0, F: history.FLost, Key: "k", Deadline: 5},
		"depth on work": {Type: history.Invoke, Process: 0, F: history.FWork, Key: "k", Depth: 2},
	} {
		if _, err := Check([]history.Event{e}, Options{}); err == nil {
			t.Errorf("%s: accepted %+v", name, e)
		}
	}
}

// A reentrant lock's owner entering again is legal; another process holding inside the nested hold
// is a violation; the hold ends at the outermost release.
func TestReentrantHolds(t *testing.T) {
	nested := func(h *hist) *hist {
		h.add(history.Event{Time: 0, Type: history.Invoke, Process: 0, F: history.FAcquire, Key: "k"})
		h.add(history.Event{Time: 5, Type: history.OK, Process: 0, F: history.FAcquire, Key: "k", Value: "a", Depth: 1})
		h.add(history.Event{Time: 100, Type: history.Invoke, Process: 0, F: history.FAcquire, Key: "k"})
		h.add(history.Event{Time: 105, Type: history.OK, Process: 0, F: history.FAcquire, Key: "k", Value: "a", Depth: 2})
		h.add(history.Event{Time: 200, Type: history.Invoke, Process: 0, F: history.FRelease, Key: "k", Value: "a", Depth: 2})
		h.add(history.Event{Time: 205, Type: history.OK, Process: 0, F: history.FRelease, Key: "k", Value: "a", Depth: 1})
		return h
	}
	h := nested(planned([]string{"k"})).release(0, "k", "a", 300, 305).end(10000, history.OK, "")
	if r := mustCheck(t, h.events()); r.ViolationCount != 0 || r.Stats.Reentries != 1 || r.Valid != Valid {
		t.Fatalf("%d violations, %d reentries, %s: legal nesting", r.ViolationCount, r.Stats.Reentries, r.Valid)
	}
	// p1 holds between the inner release and the outer one: the outer hold still lasts.
	h = nested(planned([]string{"k"})).
		acquire(1, "k", 210, 250, history.OK, "b", 0).
		release(1, "k", "b", 260, 265).
		release(0, "k", "a", 300, 305).end(10000, history.OK, "")
	if r := mustCheck(t, h.events()); r.ViolationCount != 1 {
		t.Fatalf("%d violations: an overlap inside a nested hold must be found", r.ViolationCount)
	}
}

// An unlock by a process that holds no such lease is counted: refused as not the owner's, or
// accepted (the lock let a non-owner free it).
func TestForeignUnlocksAreReported(t *testing.T) {
	h := planned([]string{"k"}).
		held(0, "k", 100).
		add(history.Event{Time: 300, Type: history.Invoke, Process: 1, F: history.FRelease, Key: "k"}).
		add(history.Event{Time: 302, Type: history.Fail, Process: 1, F: history.FRelease, Key: "k", Reason: history.ReasonNotOwner}).
		add(history.Event{Time: 400, Type: history.Invoke, Process: 2, F: history.FRelease, Key: "k"}).
		add(history.Event{Time: 402, Type: history.OK, Process: 2, F: history.FRelease, Key: "k"}).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if f := r.Stats.ForeignUnlocks; f.Refused != 1 || f.Accepted != 1 {
		t.Fatalf("foreign unlocks %+v: want 1 refused and 1 accepted", f)
	}
	if !strings.Contains(r.Summary(), "1 refused as not the owner's, 1 accepted") {
		t.Fatalf("the summary does not report them:\n%s", r.Summary())
	}
}

// A lease with no deadline (a watchdog's) lasts until its release or until the lock says it is
// lost: the loss is no finding by itself, but a grant to another client before it is an overlap.
func TestLostNewsOfALeaseWithNoDeadline(t *testing.T) {
	lost := func(at int64) history.Event {
		return history.Event{Time: at, Type: history.Info, Process: 0, F: history.FLost, Key: "k", Value: "a"}
	}
	told := planned([]string{"k"}).
		acquire(0, "k", 0, 5, history.OK, "a", 0).
		add(lost(400)).
		acquire(1, "k", 500, 505, history.OK, "b", 0).
		release(1, "k", "b", 2000, 2010).
		end(10000, history.OK, "")
	if r := mustCheck(t, told.events()); r.EarlyLossCount != 0 || r.ViolationCount != 0 || r.Stats.Losses != 1 {
		t.Errorf("told before anyone else got in: %d early losses, %d violations, %d losses; want 0, 0, 1", r.EarlyLossCount, r.ViolationCount, r.Stats.Losses)
	}
	late := planned([]string{"k"}).
		acquire(0, "k", 0, 5, history.OK, "a", 0).
		acquire(1, "k", 300, 305, history.OK, "b", 0).
		add(lost(400)).
		release(1, "k", "b", 2000, 2010).
		end(10000, history.OK, "")
	if r := mustCheck(t, late.events()); r.ViolationCount != 1 || r.Valid != Invalid {
		t.Errorf("told after another client got in: %d violations, %s; want 1, invalid", r.ViolationCount, r.Valid)
	}
}

// Refusals explained by acquires that may have set the key anyway (timed out, or failed after the
// write, as a WAIT that fell short does) are unavailability, not a deadlock: each such key lives a
// lease at most, and they kept coming.
func TestRefusalsAfterUnknownAcquiresAreUnavailability(t *testing.T) {
	h := planned([]string{"k"}).held(0, "k", 100).refusedUntil(2, "k", 500, 9800)
	for p, at := 3, int64(450); at < 9800; p, at = p+1, at+700 { // a retired process never returns
		h.add(history.Event{Time: at, Type: history.Invoke, Process: p, F: history.FAcquire, Key: "k"})
		h.add(history.Event{Time: at + 200, Type: history.Info, Process: p, F: history.FAcquire, Key: "k", Error: "timeout"})
	}
	r := mustCheck(t, h.end(10000, history.OK, "").events())
	if r.Liveness == nil || r.Liveness.Verdict != LiveUnavailable || r.Valid != Valid {
		t.Fatalf("liveness %+v, verdict %s: want unavailable and valid", r.Liveness, r.Valid)
	}
}

// Advice to run longer names the option as the run was given it: the flag, or the scenario file's
// field and the file.
func TestLongerRecoveryNamesTheSpelling(t *testing.T) {
	window := int64(20 * time.Second)
	if got := longerRecovery(&history.Plan{}, window); got != "use a --recovery of at least 20s" {
		t.Errorf("command line: %q", got)
	}
	if got := longerRecovery(&history.Plan{Scenario: "s.yaml"}, window); got != "set recovery: 20s (or more) in s.yaml" {
		t.Errorf("scenario file: %q", got)
	}
}
