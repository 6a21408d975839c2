package checker

import (
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// The first finding is the earliest overlap of all, not the first one the sweep listed.
func TestFirstFindingIsTheEarliestOverlap(t *testing.T) {
	h := (&hist{}).
		acquire(1, "z", 0, 10, history.OK, "a", 1000).
		acquire(2, "z", 20, 30, history.OK, "b", 1000).
		release(1, "z", "a", 100, 110).
		release(2, "z", "b", 120, 130).
		acquire(3, "b", 0, 5, history.OK, "c", 1000).
		acquire(4, "b", 6, 8, history.OK, "d", 1000).
		release(3, "b", "c", 100, 110).
		release(4, "b", "d", 120, 130)
	r := mustCheck(t, h.events())
	if r.FirstFinding == nil || r.FirstFinding.Kind != FindingViolation || r.FirstFinding.At != 8*ms {
		t.Fatalf("first finding %+v, want a violation at 8ms", r.FirstFinding)
	}
	if !strings.Contains(r.Summary(), "first finding: overlapping holds at 0.008s: key b: ") {
		t.Errorf("summary lacks the first finding:\n%s", r.Summary())
	}
}

// A valid run has no first finding; an overrun is not one.
func TestNoFirstFindingWithoutViolations(t *testing.T) {
	h := (&hist{}).
		acquire(1, "k", 0, 10, history.OK, "a", 50).
		work(1, "k", "a", 20, 80).
		release(1, "k", "a", 90, 100)
	if r := mustCheck(t, h.events()); r.FirstFinding != nil {
		t.Fatalf("first finding %+v in a run with only an overrun", r.FirstFinding)
	}
}

// The next grant after a fault counts only acquires invoked after the fault took effect.
func TestRegrantsCountFromTheFaultsEffect(t *testing.T) {
	h := (&hist{}).
		acquire(0, "k", 90, 300, history.OK, "a", 2000). // invoked before the kill: does not count
		release(0, "k", "a", 310, 320).
		nemesis("kill", "restart", history.EffectFault, []string{"e1"}, 100, 110).
		acquire(2, "k", 120, 430, history.OK, "c", 2000). // the first grant of an acquire asked after it
		release(2, "k", "c", 440, 445).
		acquire(1, "k", 400, 450, history.OK, "b", 2000).
		release(1, "k", "b", 460, 470).
		nemesis("start", "restart", history.EffectHeal, []string{"e1"}, 900, 910)
	r := mustCheck(t, h.events())
	if len(r.Stats.Regrants) != 1 {
		t.Fatalf("regrants %+v, want one", r.Stats.Regrants)
	}
	g := r.Stats.Regrants[0]
	if g.Applied != 110*ms || g.Grant != 430*ms || g.Gap != 320*ms {
		t.Errorf("regrant %+v, want applied 110ms, grant 430ms, gap 320ms", g)
	}
	if !strings.Contains(r.Summary(), "next grant 0.320s after it took effect") {
		t.Errorf("summary lacks the regrant:\n%s", r.Summary())
	}
}

// The validity promised is the one given at the grant: a renewal or a loss reported later does not
// change what was promised, and a lease with no deadline promised none.
func TestPromisedIsTheGrantsPromise(t *testing.T) {
	h := (&hist{}).
		acquire(0, "k", 0, 10, history.OK, "a", 0). // no deadline
		add(history.Event{Time: 50, Type: history.Info, Process: 0, F: history.FLost, Key: "k", Value: "a"}).
		acquire(1, "k", 100, 110, history.OK, "b", 1110).
		add(history.Event{Time: 500, Type: history.Info, Process: 1, F: history.FRenewed, Key: "k", Value: "b", Deadline: 2000}).
		release(1, "k", "b", 600, 610)
	r := mustCheck(t, h.events())
	if r.Stats.Unbounded != 1 || r.Stats.Promised.Count != 1 || r.Stats.Promised.Max != 1000 {
		t.Fatalf("promised %+v, unbounded %d: want one hold promised 1000ms and one unbounded", r.Stats.Promised, r.Stats.Unbounded)
	}
}
