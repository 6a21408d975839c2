package checker

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// Hand-made histories of issue 23's four classes: re-entries judged as grants, a re-entry's
// deadline, a crash read from its invoke and completion as one, and depths that must add up.

// enter adds an ok acquire of key by p at depth, with value and deadline (0: none).
func (h *hist) enter(p int, key string, inv, done int64, value string, deadline int64, depth int) *hist {
	h.add(history.Event{Time: inv, Type: history.Invoke, Process: p, F: history.FAcquire, Key: key})
	return h.add(history.Event{Time: done, Type: history.OK, Process: p, F: history.FAcquire, Key: key, Value: value, Deadline: deadline, Depth: depth, Nodes: []string{"n1"}})
}

// leave adds a release of key by p at depth, completing with typ (fail: reason lost).
func (h *hist) leave(p int, key, value string, inv, done int64, depth int, typ history.Type) *hist {
	h.add(history.Event{Time: inv, Type: history.Invoke, Process: p, F: history.FRelease, Key: key, Value: value, Depth: depth})
	e := history.Event{Time: done, Type: typ, Process: p, F: history.FRelease, Key: key, Value: value}
	if typ == history.Fail {
		e.Reason = history.ReasonLost
	}
	return h.add(e)
}

func (h *hist) news(p int, f, key, value string, at, deadline int64) *hist {
	return h.add(history.Event{Time: at, Type: history.Info, Process: p, F: f, Key: key, Value: value, Deadline: deadline})
}

// Class 1: a re-entry after the owner's hold had ended (lost, expired) is a grant of its own, and
// the finding says why.
func TestReentryAfterItsHoldEndedIsAGrant(t *testing.T) {
	for name, c := range map[string]struct {
		h    *hist
		want string
	}{
		"lost": {planned([]string{"k"}).enter(0, "k", 0, 5, "a", 0, 1).news(0, history.FLost, "k", "a", 2000, 0).
			enter(1, "k", 2400, 2500, "b", 0, 1).enter(0, "k", 2900, 3000, "a", 0, 2).
			leave(0, "k", "a", 3500, 3505, 2, history.OK).leave(1, "k", "b", 4000, 4005, 1, history.OK),
			"p0 re-entered at 3.000s (depth 2) after its lease was lost at 2.000s"},
		"expired": {planned([]string{"k"}).enter(0, "k", 0, 5, "a", 1000, 1).
			enter(1, "k", 2400, 2500, "b", 5000, 1).enter(0, "k", 2900, 3000, "a", 6000, 2).
			leave(0, "k", "a", 3500, 3505, 2, history.OK).leave(1, "k", "b", 4000, 4005, 1, history.OK),
			"p0 re-entered at 3.000s (depth 2) after its lease expired at 1.000s"},
	} {
		r := mustCheck(t, c.h.end(10000, history.OK, "").events())
		if r.Valid != Invalid || r.ViolationCount != 1 || r.Stats.LateReentries != 1 || r.Stats.Reentries != 0 {
			t.Errorf("%s: %s, %d violations, %d late re-entries, %d re-entries; want invalid, 1, 1, 0", name, r.Valid, r.ViolationCount, r.Stats.LateReentries, r.Stats.Reentries)
			continue
		}
		if d := r.Violations[0].Description; !strings.Contains(d, c.want) || !strings.Contains(d, "p1 held [2.500s") {
			t.Errorf("%s: the finding %q does not say %q and name p1's hold", name, d, c.want)
		}
	}
}

// Class 2: a re-entry re-arms the lease; its deadline is the hold's, later or earlier.
func TestReentryDeadlineIsTheHolds(t *testing.T) {
	later := planned([]string{"k"}).enter(0, "k", 0, 5, "a", 500, 1).enter(0, "k", 395, 400, "a", 1500, 2).
		enter(1, "k", 790, 800, "b", 2000, 1).release(1, "k", "b", 1800, 1805)
	if r := mustCheck(t, later.end(10000, history.OK, "").events()); r.ViolationCount != 1 || r.Stats.Reentries != 1 {
		t.Errorf("later deadline: %d violations, %d re-entries; want 1 (p1 inside the re-armed lease), 1", r.ViolationCount, r.Stats.Reentries)
	}
	earlier := planned([]string{"k"}).enter(0, "k", 0, 5, "a", 1500, 1).enter(0, "k", 395, 400, "a", 600, 2).
		enter(1, "k", 790, 800, "b", 2000, 1).release(1, "k", "b", 1800, 1805)
	if r := mustCheck(t, earlier.end(10000, history.OK, "").events()); r.ViolationCount != 0 || r.Valid != Valid {
		t.Errorf("earlier deadline: %d violations, %s; want 0, valid (the lock's new promise ended at 0.6s)", r.ViolationCount, r.Valid)
	}
}

// Class 3: a crash completion that leaves the fault, effect and nodes to its invoke still ends the
// dead client's holds, and the explanation of an overlap reads a partial completion as the whole
// operation.
func TestCrashReadFromItsInvokeAndCompletion(t *testing.T) {
	h := planned([]string{"k"}, "client-crash").enter(0, "k", 0, 5, "a", 0, 0).
		add(history.Event{Time: 300, Type: history.Invoke, Process: -1, F: "crash", Fault: FaultClientCrash, Effect: history.EffectFault, Nodes: []string{"p0"}, Value: "holding"}).
		add(history.Event{Time: 301, Type: history.Info, Process: -1, F: "crash"}).
		enter(1, "k", 400, 405, "b", 0, 0).release(1, "k", "b", 500, 505)
	r := mustCheck(t, h.end(10000, history.OK, "").events())
	if r.ViolationCount != 0 || len(r.Faults) != 1 || !slicesEqual(r.Faults[0].Nodes, []string{"p0"}) {
		t.Fatalf("%d violations, faults %+v: the crash ended p0's hold at 0.301s and names p0", r.ViolationCount, r.Faults)
	}
	kill := planned([]string{"k"}, "restart").enter(0, "k", 0, 5, "a", 0, 0).
		add(history.Event{Time: 100, Type: history.Invoke, Process: -1, F: "kill", Fault: "restart", Effect: history.EffectFault, Nodes: []string{"n1"}}).
		add(history.Event{Time: 101, Type: history.Info, Process: -1, F: "kill"}).
		enter(1, "k", 400, 405, "b", 0, 0).release(1, "k", "b", 500, 505).release(0, "k", "a", 600, 605)
	r = mustCheck(t, kill.end(10000, history.OK, "").events())
	if r.ViolationCount != 1 || !strings.Contains(r.Violations[0].Cause, "lost p0's key to restart kill n1 at 0.100s") {
		t.Fatalf("%d violations %+v: want the kill named as what hit n1", r.ViolationCount, r.Violations)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, " ") == strings.Join(b, " ") }

// Class 4: depths that contradict the process's levels are refused naming the line; what a real
// reentrant client records around failed, lost and unknown releases stays checkable.
func TestDepthsMustAddUp(t *testing.T) {
	refused := map[string]*hist{
		"released at 2 after entering once": planned([]string{"k"}).enter(0, "k", 0, 5, "a", 0, 1).leave(0, "k", "a", 100, 105, 2, history.OK),
		"entered at 3 holding 1":            planned([]string{"k"}).enter(0, "k", 0, 5, "a", 0, 1).enter(0, "k", 100, 105, "a", 0, 3),
		"entered at 2 after leaving":        planned([]string{"k"}).enter(0, "k", 0, 5, "a", 0, 1).leave(0, "k", "a", 100, 105, 1, history.OK).enter(0, "k", 200, 205, "a", 0, 2),
		"depth on renewed":                  planned([]string{"k"}).enter(0, "k", 0, 5, "a", 0, 1).add(history.Event{Time: 50, Type: history.Info, Process: 0, F: history.FRenewed, Key: "k", Value: "a", Depth: 1}),
		"depth on a failed acquire":         planned([]string{"k"}).add(history.Event{Time: 0, Type: history.Invoke, Process: 0, F: history.FAcquire, Key: "k"}).add(history.Event{Time: 5, Type: history.Fail, Process: 0, F: history.FAcquire, Key: "k", Reason: history.ReasonHeld, Depth: 1}),
	}
	for name, h := range refused {
		_, err := Check(h.end(10000, history.OK, "").events(), Options{})
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Line == 0 {
			t.Errorf("%s: %v, want a ValidationError naming the line", name, err)
		}
	}
	checkable := map[string]*hist{
		// The inner release timed out: the id retires, and the new one releases the outer level.
		"retired id releases the outer level": planned([]string{"k"}).enter(0, "k", 0, 5, "a", 0, 1).enter(0, "k", 100, 105, "a", 0, 2).
			leave(0, "k", "a", 200, 205, 2, history.Info).leave(3, "k", "a", 300, 305, 1, history.OK),
		// The inner release found the lease gone; the client still leaves its outer level.
		"lost inner release, then the outer": planned([]string{"k"}).enter(0, "k", 0, 5, "a", 0, 1).enter(0, "k", 100, 105, "a", 0, 2).
			leave(0, "k", "a", 200, 205, 2, history.Fail).leave(0, "k", "a", 300, 305, 1, history.Fail),
		// A release that failed with an error left nothing, and is retried.
		"retried release": planned([]string{"k"}).enter(0, "k", 0, 5, "a", 0, 1).
			add(history.Event{Time: 100, Type: history.Invoke, Process: 0, F: history.FRelease, Key: "k", Value: "a", Depth: 1}).
			add(history.Event{Time: 105, Type: history.Fail, Process: 0, F: history.FRelease, Key: "k", Value: "a", Reason: history.ReasonError}).
			leave(0, "k", "a", 200, 205, 1, history.OK),
		// A lock that silently lost the lease grants the owner afresh (depth 1 again).
		"fresh grant inside a hold": planned([]string{"k"}).enter(0, "k", 0, 5, "a", 0, 1).enter(0, "k", 100, 105, "a", 0, 1).
			leave(0, "k", "a", 200, 205, 1, history.OK).leave(0, "k", "a", 300, 305, 1, history.OK),
		// After an acquire of unknown outcome the next depth is taken as it comes.
		"re-entry after an unknown acquire": planned([]string{"k"}).enter(0, "k", 0, 5, "a", 0, 1).
			add(history.Event{Time: 100, Type: history.Invoke, Process: 0, F: history.FAcquire, Key: "k"}).
			add(history.Event{Time: 105, Type: history.Info, Process: 0, F: history.FAcquire, Key: "k"}).
			enter(0, "k", 200, 205, "a", 0, 3).leave(0, "k", "a", 300, 305, 3, history.OK).leave(0, "k", "a", 400, 405, 1, history.OK),
	}
	for name, h := range checkable {
		if _, err := Check(h.end(10000, history.OK, "").events(), Options{}); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
}

// One rule for the lock's renewals and the client's extends: after the lease's promise had ended,
// either is a late renewal, a grant of its own from then on, which breaks mutual exclusion where it
// overlaps another client's hold; a watchdog's renewals of a lease with no deadline are not late.
func TestLateRenewalIsJudgedAsALateExtend(t *testing.T) {
	late := planned([]string{"k"}).enter(0, "k", 0, 5, "a", 500, 0).news(0, history.FRenewed, "k", "a", 600, 1100).
		news(0, history.FRenewed, "k", "a", 700, 1200)
	r := mustCheck(t, late.end(10000, history.OK, "").events())
	if r.Valid != Valid || r.LateExtendCount != 1 || r.LateExtends[0].F != history.FRenewed || !strings.Contains(r.LateExtends[0].Description, "late renewal") {
		t.Errorf("renewed after the deadline: %s, %d late, %+v; want valid, 1 late renewal (the second renews the revived lease)", r.Valid, r.LateExtendCount, r.LateExtends)
	}
	// The same while p1, granted at 550 after the deadline, still holds: two holders.
	over := planned([]string{"k"}).enter(0, "k", 0, 5, "a", 500, 0).enter(1, "k", 540, 550, "b", 2000, 0).
		news(0, history.FRenewed, "k", "a", 600, 1100)
	if r := mustCheck(t, over.end(10000, history.OK, "").events()); r.Valid != Invalid || r.ViolationCount != 1 || !strings.Contains(r.Violations[0].Description, "late renewal") {
		t.Errorf("renewed over another holder: %s, %d violations %+v; want invalid, 1 naming the late renewal", r.Valid, r.ViolationCount, r.Violations)
	}
	lost := planned([]string{"k"}).enter(0, "k", 0, 5, "a", 0, 1).news(0, history.FLost, "k", "a", 300, 0).
		enter(1, "k", 340, 350, "b", 0, 1).news(0, history.FRenewed, "k", "a", 400, 0)
	if r := mustCheck(t, lost.end(10000, history.OK, "").events()); r.LateExtendCount != 1 || r.Valid != Invalid {
		t.Errorf("renewed after it was reported lost, while p1 held: %d late, %s; want 1, invalid", r.LateExtendCount, r.Valid)
	}
	watchdog := planned([]string{"k"}).enter(0, "k", 0, 5, "a", 0, 1).news(0, history.FRenewed, "k", "a", 300, 1300).
		news(0, history.FRenewed, "k", "a", 600, 1600).leave(0, "k", "a", 700, 705, 1, history.OK).news(0, history.FRenewed, "k", "a", 702, 1702)
	if r := mustCheck(t, watchdog.end(10000, history.OK, "").events()); r.LateExtendCount != 0 || r.Valid != Valid {
		t.Errorf("a watchdog's renewals: %d late, %s; want 0, valid", r.LateExtendCount, r.Valid)
	}
	inTime := planned([]string{"k"}).enter(0, "k", 0, 5, "a", 500, 0).news(0, history.FRenewed, "k", "a", 400, 1400).
		enter(1, "k", 900, 1000, "b", 3000, 0).release(1, "k", "b", 2000, 2005)
	if r := mustCheck(t, inTime.end(10000, history.OK, "").events()); r.ViolationCount != 1 || r.LateExtendCount != 0 {
		t.Errorf("renewed in time: %d violations, %d late; want 1 (p1 inside the renewed lease), 0", r.ViolationCount, r.LateExtendCount)
	}
}
