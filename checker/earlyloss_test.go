package checker

import (
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// lostRelease adds a release of p's lease completing at done with reason lost.
func (h *hist) lostRelease(p int, key, value string, inv, done int64) *hist {
	h.add(history.Event{Time: inv, Type: history.Invoke, Process: p, F: history.FRelease, Key: key, Value: value})
	return h.add(history.Event{Time: done, Type: history.Fail, Process: p, F: history.FRelease, Key: key, Value: value, Reason: history.ReasonLost})
}

// extend adds an extend of p's lease; an ok one carries the new deadline.
func (h *hist) extend(p int, key, value string, inv, done int64, typ history.Type, deadline int64) *hist {
	h.add(history.Event{Time: inv, Type: history.Invoke, Process: p, F: history.FExtend, Key: key, Value: value})
	e := history.Event{Time: done, Type: typ, Process: p, F: history.FExtend, Key: key, Value: value, Deadline: deadline}
	if typ == history.Fail {
		e.Reason = history.ReasonLost
	}
	return h.add(e)
}

func TestReleaseLostBeforeDeadlineIsEarlyLoss(t *testing.T) {
	h := (&hist{}).acquire(0, "k", 0, 10, history.OK, "a", 1000).lostRelease(0, "k", "a", 500, 510)
	r := mustCheck(t, h.events())
	if r.LockValid != Invalid || r.EarlyLossCount != 1 {
		t.Fatalf("lock %v with %d early losses, want invalid with 1", r.LockValid, r.EarlyLossCount)
	}
	if got := r.EarlyLosses[0]; got.Cause != "no fault" || got.Early != 490*ms {
		t.Fatalf("early loss %+v: want cause \"no fault\", 490ms early", got)
	}
}

func TestReleaseLostAfterDeadlineIsNoFinding(t *testing.T) {
	// Invoked before the deadline but completed after it: the release may have landed after the
	// lease ended, as the lock promised it could.
	h := (&hist{}).acquire(0, "k", 0, 10, history.OK, "a", 1000).lostRelease(0, "k", "a", 990, 1001)
	r := mustCheck(t, h.events())
	if r.EarlyLossCount != 0 || r.LockValid != Valid {
		t.Fatalf("lock %v with %d early losses, want valid with none", r.LockValid, r.EarlyLossCount)
	}
}

func TestEarlyLossNamesTheFault(t *testing.T) {
	h := (&hist{}).acquire(0, "k", 0, 10, history.OK, "a", 1000).
		nemesis("kill", "restart", history.EffectFault, []string{"n1"}, 100, 120).
		lostRelease(0, "k", "a", 500, 510)
	r := mustCheck(t, h.events())
	if r.EarlyLossCount != 1 || r.EarlyLosses[0].Cause == "no fault" {
		t.Fatalf("early losses %+v: want one, caused by the restart", r.EarlyLosses)
	}
}

func TestExtendMovesTheDeadline(t *testing.T) {
	// p0's lease ends at 1000, renewed at 600 until 1600; p1 acquires at 1200 while p0 still holds.
	h := (&hist{}).acquire(0, "k", 0, 10, history.OK, "a", 1000).
		extend(0, "k", "a", 600, 610, history.OK, 1600).
		acquire(1, "k", 1100, 1200, history.OK, "b", 3000).
		release(0, "k", "a", 1500, 1510)
	r := mustCheck(t, h.events())
	if r.ViolationCount != 1 || r.LockValid != Invalid {
		t.Fatalf("lock %v with %d violations, want the extended hold to overlap p1's", r.LockValid, r.ViolationCount)
	}
	// The same without the extend ends p0's hold at 1000: valid.
	h = (&hist{}).acquire(0, "k", 0, 10, history.OK, "a", 1000).
		acquire(1, "k", 1100, 1200, history.OK, "b", 3000)
	if r := mustCheck(t, h.events()); r.LockValid != Valid {
		t.Fatalf("lock %v without the extend, want valid", r.LockValid)
	}
}

// A late extend is a grant of its own from its completion: alone it is a finding, not a violation
// (an owner-checked renewal landing just after the promised deadline keeps a key nobody else has);
// when another client was granted the key in between and still holds it, the revived hold overlaps
// that client's, and the violation names the late extend.
func TestLateExtendIsAGrant(t *testing.T) {
	h := (&hist{}).acquire(0, "k", 0, 10, history.OK, "a", 1000).
		extend(0, "k", "a", 990, 1010, history.OK, 2000).
		release(0, "k", "a", 1500, 1510)
	r := mustCheck(t, h.events())
	if r.LateExtendCount != 1 || r.LockValid != Valid {
		t.Fatalf("alone: lock %v with %d late extends, want valid with 1", r.LockValid, r.LateExtendCount)
	}
	// p1 is granted at 1005, after p0's lease ended; p0's extend revives its lease at 1010.
	h = (&hist{}).acquire(0, "k", 0, 10, history.OK, "a", 1000).
		acquire(1, "k", 1001, 1005, history.OK, "b", 2500).
		extend(0, "k", "a", 990, 1010, history.OK, 2000).
		release(0, "k", "a", 1500, 1510).
		release(1, "k", "b", 1600, 1610)
	r = mustCheck(t, h.events())
	if r.LateExtendCount != 1 || r.LockValid != Invalid || r.ViolationCount != 1 {
		t.Fatalf("over another holder: lock %v with %d late extends and %d violations, want invalid with 1 and 1", r.LockValid, r.LateExtendCount, r.ViolationCount)
	}
	if d := r.Violations[0].Description; !strings.Contains(d, "late extend") {
		t.Errorf("the violation does not name the late extend: %s", d)
	}
	// p1 held and left before the late extend: no two holders at once.
	h = (&hist{}).acquire(0, "k", 0, 10, history.OK, "a", 1000).
		acquire(1, "k", 1001, 1002, history.OK, "b", 2500).
		release(1, "k", "b", 1003, 1004).
		extend(0, "k", "a", 990, 1010, history.OK, 2000).
		release(0, "k", "a", 1500, 1510)
	if r := mustCheck(t, h.events()); r.LockValid != Valid || r.LateExtendCount != 1 {
		t.Fatalf("after another's whole hold: lock %v with %d late extends, want valid with 1", r.LockValid, r.LateExtendCount)
	}
}

// The renewals that follow a late extend renew the lease the late one revived: one finding, not
// one per renewal; the revived hold then lasts to the last renewed deadline.
func TestRenewalsAfterALateExtendCountOnce(t *testing.T) {
	h := (&hist{}).acquire(0, "k", 0, 10, history.OK, "a", 1000).
		extend(0, "k", "a", 990, 1010, history.OK, 2000).
		extend(0, "k", "a", 1500, 1510, history.OK, 2500).
		extend(0, "k", "a", 2000, 2010, history.OK, 3000).
		extend(0, "k", "a", 3500, 3510, history.OK, 4000). // after the revived lease ended too: a new finding
		acquire(1, "k", 2600, 2700, history.OK, "b", 5000) // inside the revived, renewed hold: two holders
	r := mustCheck(t, h.events())
	if r.LateExtendCount != 2 || r.LockValid != Invalid || r.ViolationCount != 2 {
		t.Fatalf("lock %v with %d late extends and %d violations, want invalid with 2 and 2", r.LockValid, r.LateExtendCount, r.ViolationCount)
	}
}

func TestExtendLostBeforeDeadlineIsEarlyLoss(t *testing.T) {
	h := (&hist{}).acquire(0, "k", 0, 10, history.OK, "a", 1000).
		extend(0, "k", "a", 600, 610, history.Fail, 0)
	if r := mustCheck(t, h.events()); r.EarlyLossCount != 1 {
		t.Fatalf("%d early losses, want 1", r.EarlyLossCount)
	}
}

func TestReasonLostOnlyOnReleaseOrExtend(t *testing.T) {
	h := (&hist{}).add(history.Event{Type: history.Invoke, Process: 0, F: history.FAcquire, Key: "k"}).
		add(history.Event{Time: 1, Type: history.Fail, Process: 0, F: history.FAcquire, Key: "k", Reason: history.ReasonLost})
	if _, err := Check(h.events(), Options{}); err == nil {
		t.Fatal("an acquire failing with reason lost was accepted")
	}
}
