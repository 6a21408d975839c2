package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// edgePlanned starts a history whose plan has the given TTL and nemeses.
func edgePlanned(ttl time.Duration, nemeses ...string) *hist {
	h := &hist{}
	return h.add(history.Event{Type: history.Invoke, Process: history.HarnessProcess, F: history.FRun, Plan: &history.Plan{
		Lock: "single", Workload: "mutex", Keys: []string{"k"}, Clients: 3, TTL: int64(ttl),
		TimeLimit: int64(8 * time.Second), Recovery: int64(2 * time.Second), Nemeses: nemeses, Seed: 1,
	}})
}

// edgeHolds adds n holds of key k by p, each released in the last tenth of its 1s validity.
func (h *hist) edgeHolds(p, n int) *hist {
	for i := range n {
		t := int64(i) * 1000
		v := string(rune('a' + i))
		h.grant(p, "k", "n1", t, t+1, v, t+1001).release(p, "k", v, t+950, t+955)
	}
	return h
}

func TestEdgeLineNamesTheCardForAPlainRun(t *testing.T) {
	r := mustCheck(t, edgePlanned(2*time.Second).edgeHolds(0, 4).end(10000, history.OK, "").events())
	ed := r.Evidence.Edges
	if ed == nil || ed.NearDeadline != 4 || ed.FractionalTTL {
		t.Fatalf("edges %+v: want 4 holds near the deadline, whole-second TTL", ed)
	}
	want := "lease edges (no rule: what a valid verdict covers): nothing at the lease's edge was tried beyond holds to the deadline (4 holds released in the last tenth of their validity and 0 that ran to their deadline): `lockpick card single` runs the edge and fault battery"
	if got := ed.Line(); got != want {
		t.Errorf("line\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(r.Summary(), want) {
		t.Errorf("summary lacks the edge line:\n%s", r.Summary())
	}
}

func TestEdgeLineListsWhatWasTried(t *testing.T) {
	h := edgePlanned(1500*time.Millisecond, "latency:group=c2:target=all:mode=spike", "clock:jump=fast:rate=0.008:target=all", "client-clock:target=all:offset=1500ms").
		edgeHolds(0, 1).
		acquire(1, "k", 2000, 3500, history.Info, "", 0)
	for _, f := range []string{"latency", "clock", "client-clock"} {
		h.nemesis("start", f, history.EffectFault, []string{"n1"}, 4000, 4001)
	}
	ed := mustCheck(t, h.end(10000, history.OK, "").events()).Evidence.Edges
	got := ed.Line()
	for _, want := range []string{
		"tried slow clients (latency:group=c2:target=all:mode=spike), 1 requests that timed out, a fractional TTL (1.5s), client clocks moved, node clocks moved (clock:jump=fast:rate=0.008:target=all)",
		"not tried: few holds at the deadline (1 holds released in the last tenth of their validity and 0 that ran to their deadline), extends near the deadline",
		"`lockpick card single` runs the edge and fault battery",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("line\n%s\nlacks\n%s", got, want)
		}
	}
}

func TestEdgeLineCountsExtendsNearTheDeadline(t *testing.T) {
	h := edgePlanned(time.Second).
		grant(0, "k", "n1", 0, 10, "a", 1010).
		extend(0, "k", "a", 950, 960, history.OK, 1950).
		release(0, "k", "a", 1900, 1905).
		end(10000, history.OK, "")
	ed := mustCheck(t, h.events()).Evidence.Edges
	if ed.Extends != 1 || ed.NearExtends != 1 {
		t.Errorf("edges %+v: want one extend, sent near the deadline", ed)
	}
}

func TestEdgeLineLeavesOutNemesesThatAppliedNothing(t *testing.T) {
	h := edgePlanned(time.Second, "client-clock:target=all:offset=1500ms").edgeHolds(0, 4).end(10000, history.OK, "")
	if ed := mustCheck(t, h.events()).Evidence.Edges; len(ed.ClientClocks) != 0 {
		t.Errorf("a client-clock nemesis that applied no fault moved no clock: %+v", ed)
	}
}
