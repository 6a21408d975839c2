package checker

import (
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// grant adds an acquire of key by p granted by node alone (a lock of one node).
func (h *hist) grant(p int, key, node string, inv, done int64, value string, deadline int64) *hist {
	h.add(history.Event{Time: inv, Type: history.Invoke, Process: p, F: history.FAcquire, Key: key})
	return h.add(history.Event{Time: done, Type: history.OK, Process: p, F: history.FAcquire, Key: key, Value: value, Deadline: deadline, Nodes: []string{node}})
}

// refuse adds an acquire of key by p refused as held.
func (h *hist) refuse(p int, key string, inv, done int64) *hist {
	h.add(history.Event{Time: inv, Type: history.Invoke, Process: p, F: history.FAcquire, Key: key})
	return h.add(history.Event{Time: done, Type: history.Fail, Process: p, F: history.FAcquire, Key: key, Reason: history.ReasonHeld})
}

func culpritsOf(r *Result, kind string) []Culprit {
	var out []Culprit
	for _, u := range r.Culprits {
		if u.Kind == kind {
			out = append(out, u)
		}
	}
	return out
}

func TestLateReleaseWhileAnotherHeldIsACulprit(t *testing.T) {
	// p0's lease ends at 1s; p7 is granted at 1.11s; p0's release at 1.2s still succeeds.
	h := planned([]string{"k"}).
		grant(0, "k", "n1", 0, 10, "a", 1000).
		grant(7, "k", "n1", 1100, 1110, "b", 2100).
		release(0, "k", "a", 1200, 1205).
		release(7, "k", "b", 1500, 1505).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if r.Valid != Valid {
		t.Fatalf("a late release alone must not make the run invalid:\n%s", r.Summary())
	}
	got := culpritsOf(r, CulpritLateRelease)
	if len(got) != 1 || r.LateReleaseCount != 1 {
		t.Fatalf("want one late release culprit, got %+v (late releases %d)", r.Culprits, r.LateReleaseCount)
	}
	want := "p0's release at 1.200s, 200.0ms after its lease ended at 1.000s, succeeded while p7 held the key (granted at 1.110s)"
	if !strings.Contains(got[0].Description, want) || got[0].Cause != "no fault" {
		t.Errorf("description %q, cause %q: want %q and no fault", got[0].Description, got[0].Cause, want)
	}
	if s := r.Summary(); !strings.Contains(s, want) || !strings.Contains(s, "releases accepted after their lease had ended: 1 (1 while another client held the key)") {
		t.Errorf("summary lacks the culprit:\n%s", s)
	}
}

func TestLateReleaseAloneIsCountedNotListed(t *testing.T) {
	// A correct lock's release may land a few ms after the promised deadline, on its own key.
	h := planned([]string{"k"}).
		grant(0, "k", "n1", 0, 10, "a", 1000).
		release(0, "k", "a", 1004, 1006).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if r.Valid != Valid || r.CulpritCount != 0 || r.LateReleaseCount != 1 {
		t.Fatalf("want valid, no culprit, one late release: %v, %+v, %d", r.Valid, r.Culprits, r.LateReleaseCount)
	}
}

func TestViolationNamesTheLateRelease(t *testing.T) {
	h := planned([]string{"k"}).
		grant(0, "k", "n1", 0, 10, "a", 1000).
		grant(7, "k", "n1", 1100, 1110, "b", 2100).
		release(0, "k", "a", 1200, 1205).
		grant(9, "k", "n1", 1299, 1300, "c", 2300).
		release(7, "k", "b", 1500, 1505).
		release(9, "k", "c", 1600, 1605).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if r.Valid != Invalid || len(r.Violations) != 1 {
		t.Fatalf("want the overlap of p7 and p9:\n%s", r.Summary())
	}
	v := r.Violations[0]
	want := "p0's release at 1.200s, 200.0ms after its lease ended at 1.000s, deleted p7's key 95.0ms before p9 was granted"
	if v.Culprit != want || !strings.HasPrefix(v.Cause, want+"; n1 granted both leases and no fault hit n1") {
		t.Errorf("culprit %q\ncause %q\nwant %q", v.Culprit, v.Cause, want)
	}
	if !strings.Contains(r.Summary(), "cause: "+want) {
		t.Errorf("summary lacks the culprit as the cause:\n%s", r.Summary())
	}
}

func TestViolationWithAFaultKeepsTheFault(t *testing.T) {
	h := planned([]string{"k"}, "restart").
		grant(0, "k", "n1", 0, 10, "a", 1000).
		grant(7, "k", "n1", 1100, 1110, "b", 2100).
		nemesis("kill", "restart", history.EffectFault, []string{"n1"}, 1150, 1160).
		release(0, "k", "a", 1200, 1205).
		grant(9, "k", "n1", 1299, 1300, "c", 2300).
		release(7, "k", "b", 1500, 1505).
		release(9, "k", "c", 1600, 1605).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if v := r.Violations[0]; v.Culprit != "" || !strings.Contains(v.Cause, "it lost p7's key to restart kill n1 at 1.150s (after p7's grant)") {
		t.Errorf("a fault explains it: culprit %q, cause %q", v.Culprit, v.Cause)
	}
}

func TestForeignReleaseIsNamed(t *testing.T) {
	h := planned([]string{"k"}).
		grant(7, "k", "n1", 100, 110, "b", 1100).
		release(4, "k", "", 300, 305).
		grant(9, "k", "n1", 399, 400, "c", 1400).
		release(7, "k", "b", 500, 505).
		release(9, "k", "c", 600, 605).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	want := "p4's release at 0.300s, of a lock it did not hold, was accepted and deleted p7's key 95.0ms before p9 was granted"
	if len(r.Violations) != 1 || r.Violations[0].Culprit != want {
		t.Fatalf("want the foreign release named %q:\n%s", want, r.Summary())
	}
}

func TestReleaseThatKeptTheKey(t *testing.T) {
	base := func() *hist {
		return planned([]string{"k"}).
			grant(0, "k", "n1", 0, 10, "a", 900).
			release(0, "k", "a", 100, 105)
	}
	// Nobody else could hold the key, yet p3 is refused: the release left it set.
	r := mustCheck(t, base().refuse(3, "k", 200, 201).end(10000, history.OK, "").events())
	got := culpritsOf(r, CulpritKeptKey)
	if r.Valid != Valid || len(got) != 1 {
		t.Fatalf("want valid with one kept key, got %v, %+v", r.Valid, r.Culprits)
	}
	if got[0].Value != "a" {
		t.Errorf("value %q, want the released lease's a", got[0].Value)
	}
	want := "p0's release at 0.100s succeeded, yet p3's acquire at 0.200s, before p0's lease would have ended at 1.000s, was refused as held while no other lease could hold the key: the release did not take the lock away from p0"
	if !strings.Contains(got[0].Description, want) {
		t.Errorf("description %q\nwant %q", got[0].Description, want)
	}

	cases := map[string]*hist{
		// p5's acquire was in flight and took the key: the refusal is p5's doing.
		"in flight": base().grant(5, "k", "n1", 150, 250, "e", 1150).refuse(3, "k", 200, 201).release(5, "k", "e", 300, 305),
		// p5 holds it.
		"held": base().grant(5, "k", "n1", 150, 160, "e", 1150).refuse(3, "k", 200, 201).release(5, "k", "e", 300, 305),
		// p6's acquire timed out: its key may be there.
		"timed out": base().acquire(6, "k", 110, 150, history.Info, "", 0).refuse(3, "k", 200, 201),
		// After the lease and its TTL, the key cannot be p0's.
		"too late": base().refuse(3, "k", 1200, 1201),
	}
	for name, h := range cases {
		r := mustCheck(t, h.end(10000, history.OK, "").events())
		if got := culpritsOf(r, CulpritKeptKey); len(got) != 0 {
			t.Errorf("%s: want no kept key, got %+v", name, got)
		}
	}
}

func TestSharedValueIsACulprit(t *testing.T) {
	h := planned([]string{"k"}).
		grant(3, "k", "n1", 0, 10, "host:123", 1000).
		release(3, "k", "host:123", 100, 105).
		grant(7, "k", "n1", 200, 210, "host:123", 1200).
		release(7, "k", "host:123", 300, 305).
		grant(3, "k", "n1", 400, 410, "host:9", 1400).
		release(3, "k", "host:9", 500, 505).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	got := culpritsOf(r, CulpritSharedValue)
	if r.Valid != Valid || len(got) != 1 {
		t.Fatalf("want valid with one shared value, got %v, %+v", r.Valid, r.Culprits)
	}
	want := "key k: p3 and p7 were both granted value host:123 (at 0.010s and 0.210s): the lock cannot tell their leases apart; a late release or extend by one acts on the other's"
	if got[0].Description != want {
		t.Errorf("description %q\nwant %q", got[0].Description, want)
	}
}

func TestViolationNamesTheUnreducedValidity(t *testing.T) {
	// TTL 1s: p7's acquire took 700ms and was promised the whole second from its grant.
	h := planned([]string{"k"}).
		grant(7, "k", "n1", 0, 700, "b", 1700).
		grant(9, "k", "n1", 1050, 1060, "c", 2000).
		release(7, "k", "b", 1500, 1505).
		release(9, "k", "c", 1600, 1605).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if len(r.Violations) != 1 {
		t.Fatalf("want one violation:\n%s", r.Summary())
	}
	want := "p7's acquire took 700.0ms (asked at 0.000s, granted at 0.700s) and was promised 1.000s from its grant, with a TTL of 1.000s: the time the acquire took was not subtracted, so its key could expire from 1.000s on, before its deadline 1.700s; p9 was granted at 1.060s"
	if got := r.Violations[0].Culprit; got != want {
		t.Errorf("culprit %q\nwant %q", got, want)
	}
}

func TestViolationNamesTheOKAfterATimeout(t *testing.T) {
	h := planned([]string{"k"}).
		acquire(7, "k", 0, 900, history.Info, "", 0).
		grant(7, "k", "n1", 950, 960, "b", 1900).
		grant(9, "k", "n1", 1200, 1210, "c", 2200).
		release(7, "k", "b", 1500, 1505).
		release(9, "k", "c", 1600, 1605).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if len(r.Violations) != 1 {
		t.Fatalf("want one violation:\n%s", r.Summary())
	}
	if got := r.Violations[0].Culprit; !strings.HasPrefix(got, "p7's acquire at 0.950s came back ok after its own acquire of the key at 0.000s had timed out") {
		t.Errorf("culprit %q", got)
	}
}

func TestStaleWriteNamesTheHolder(t *testing.T) {
	h := pausedRun("none", history.OK, 3)
	h.evs = h.evs[:len(h.evs)-2] // the final read, made again below
	h.cycle(3, 35, 10, 4, 2, 44, history.OK)
	h.final(50, 3)
	r := mustCheckCounter(t, h.evs)
	sw := r.Resource.StaleWrites
	if len(sw) != 1 || sw[0].Holder != "p3" {
		t.Fatalf("want p0's stale write made while p3 held the key: %+v", sw)
	}
	// This history's clock is in nanoseconds, so the times print as zero.
	if want := "after its lease ended at 0.000s, while p3 held the key (granted at 0.000s)"; !strings.Contains(sw[0].Description, want) {
		t.Errorf("description %q\nwant %q", sw[0].Description, want)
	}
}

func TestViolationNamesAReleaseOfAnotherValue(t *testing.T) {
	// p6's late release deletes p4's key and p5 gets in; p4's own release, on time, then deletes
	// p5's key and p1 gets in.
	h := planned([]string{"k"}).
		grant(6, "k", "n1", 0, 10, "f", 500).
		grant(4, "k", "n1", 600, 610, "d", 1600).
		release(6, "k", "f", 700, 705).
		grant(5, "k", "n1", 720, 730, "e", 1730).
		release(4, "k", "d", 800, 805).
		grant(1, "k", "n1", 900, 910, "g", 1910).
		release(5, "k", "e", 1000, 1005).
		release(1, "k", "g", 1100, 1105).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	got := map[string]string{}
	for _, v := range r.Violations {
		got[describeHold(v.A)[:2]+describeHold(v.B)[:2]] = v.Culprit
	}
	if want := "p6's release at 0.700s, 200.0ms after its lease ended at 0.500s, deleted p4's key 25.0ms before p5 was granted"; got["p4p5"] != want {
		t.Errorf("p4/p5: culprit %q, want %q", got["p4p5"], want)
	}
	if want := "p4's release at 0.800s, of its own lease, succeeded while p5 held the key (granted at 0.730s) and deleted it 105.0ms before p1 was granted"; got["p5p1"] != want {
		t.Errorf("p5/p1: culprit %q, want %q (all %v)", got["p5p1"], want, got)
	}
}

// A release of a value the lock granted twice, while the other holder held it, is the remover named
// for the grant after it (the release's value is its hold's: relOp keeps no copy).
func TestViolationNamesAReleaseOfASharedValue(t *testing.T) {
	h := planned([]string{"k"}).
		grant(3, "k", "n1", 0, 10, "v", 1000).
		grant(7, "k", "n1", 100, 110, "v", 1100).
		release(3, "k", "v", 200, 205).
		grant(9, "k", "n1", 300, 310, "w", 1300).
		release(7, "k", "v", 400, 405).
		release(9, "k", "w", 500, 505).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	want := "p3's release at 0.200s named value v, which the lock had granted p7 too: it deleted p7's key 105.0ms before p9 was granted"
	for _, v := range r.Violations {
		if strings.Contains(v.Culprit, want) {
			return
		}
	}
	t.Fatalf("no violation names %q:\n%s", want, r.Summary())
}
