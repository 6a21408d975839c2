package checker

import (
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// died adds the death of process pid's client program at `at`, as the workload records it, and the
// slot going on at `restart`.
func (h *hist) died(pid string, at, restart int64) *hist {
	ev := history.Event{Time: at, Type: history.Invoke, Process: -1, F: history.FExit, Fault: history.FaultClientExit, Effect: history.EffectFault, Nodes: []string{pid}, Value: "exit status 1"}
	h.add(ev)
	ev.Type, ev.Stderr = history.Info, "Traceback (most recent call last): | ZeroDivisionError: division by zero (clients/p0.log)"
	h.add(ev)
	heal := history.Event{Time: restart, Type: history.Invoke, Process: -1, F: history.FRestart, Fault: history.FaultClientExit, Effect: history.EffectHeal, Nodes: []string{pid}}
	h.add(heal)
	heal.Type = history.Info
	return h.add(heal)
}

// A client program that died holding a lease holds nothing after its death, as after a client
// crash: the next client's hold is no violation, the death is a finding with the end of the
// program's stderr, and the verdict stands.
func TestClientExitEndsTheHoldAndIsAFinding(t *testing.T) {
	h := planned([]string{"k"}).
		acquire(0, "k", 0, 5, history.OK, "a", 0). // no deadline: without the death, it holds to the end
		add(history.Event{Time: 400, Type: history.Invoke, Process: 0, F: history.FWork, Key: "k", Value: "a"}).
		died("p0", 500, 520).
		add(history.Event{Time: 501, Type: history.Info, Process: 0, F: history.FWork, Key: "k", Value: "a", Error: "the client program died"}).
		acquire(10, "k", 1600, 1605, history.OK, "b", 0).
		release(10, "k", "b", 1700, 1705).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if r.ViolationCount != 0 || r.OverrunCount != 0 {
		t.Fatalf("%d violations, %d overruns: the dead process's hold must end at its death", r.ViolationCount, r.OverrunCount)
	}
	if r.Valid == Invalid {
		t.Fatalf("verdict %s: a client's death is a finding, not a violation", r.Valid)
	}
	ce := r.ClientExits
	if ce == nil || ce.Count != 1 || len(ce.Deaths) != 1 || ce.Deaths[0].Process != 0 || ce.Deaths[0].Exit != "exit status 1" || !strings.Contains(ce.Deaths[0].Stderr, "ZeroDivisionError") {
		t.Fatalf("client exits %+v: want p0's death with its exit and stderr", ce)
	}
	if s := r.Summary(); !strings.Contains(s, "client crashes: the client program crashed 1 time") || !strings.Contains(s, "ZeroDivisionError") {
		t.Fatalf("the summary does not report the crash:\n%s", s)
	}
	// The death's window heals when the slot goes on.
	for _, f := range r.Faults {
		if f.Fault == history.FaultClientExit && (!f.Healed || f.End != 520_000_000) {
			t.Fatalf("fault window %+v: want healed at the restart's completion", f)
		}
	}
}

// A death with a request in flight: the request completes unknown after the death, which the
// validator accepts, and no client exit is reported for a run without deaths.
func TestClientExitDuringARequest(t *testing.T) {
	h := planned([]string{"k"}).
		held(1, "k", 100).
		add(history.Event{Time: 400, Type: history.Invoke, Process: 0, F: history.FAcquire, Key: "k"}).
		died("p0", 401, 420).
		add(history.Event{Time: 402, Type: history.Info, Process: 0, F: history.FAcquire, Key: "k", Error: "client crashed"}).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if r.ClientExits == nil || r.ClientExits.Count != 1 {
		t.Fatalf("client exits %+v: want one", r.ClientExits)
	}
	if r := mustCheck(t, planned([]string{"k"}).held(1, "k", 100).end(10000, history.OK, "").events()); r.ClientExits != nil {
		t.Fatalf("client exits %+v in a run where no client died", r.ClientExits)
	}
}

// A client program's death is no heal liveness counts from: a death late in the recovery leaves
// liveness judged; a key its dead holder left set for good is still a deadlock.
func TestClientExitLeavesLivenessJudged(t *testing.T) {
	h := planned([]string{"k"}).
		held(0, "k", 100).
		died("p3", 9900, 9950).
		end(10000, history.OK, "")
	if r := mustCheck(t, h.events()); r.Liveness == nil || r.Liveness.Verdict != LiveOK {
		t.Fatalf("liveness %+v: want ok, judged from the start", r.Liveness)
	}
	h = planned([]string{"k"}).
		add(history.Event{Time: 400, Type: history.Invoke, Process: 1, F: history.FAcquire, Key: "k"}).
		died("p1", 401, 420).
		add(history.Event{Time: 402, Type: history.Info, Process: 1, F: history.FAcquire, Key: "k", Error: "client crashed"}).
		refusedUntil(2, "k", 500, 9800).
		end(10000, history.OK, "")
	r := mustCheck(t, h.events())
	if r.Liveness == nil || r.Liveness.Verdict != LiveDeadlock || !strings.Contains(r.Liveness.Findings[0].Description, "p1 crashed") {
		t.Fatalf("liveness %+v: want a deadlock naming p1's death", r.Liveness)
	}
}
