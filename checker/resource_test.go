package checker

import (
	"strconv"
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// counterHist builds counter-workload histories by hand, on a millisecond clock.
type counterHist struct {
	evs   []history.Event
	guard string
}

func (h *counterHist) add(e history.Event) {
	e.Index = int64(len(h.evs))
	h.evs = append(h.evs, e)
}

// cycle is one process's lock cycle: acquire at t (deadline t+ttl), read v at t+1, write v+1 at
// wt with outcome, release at wt+1.
func (h *counterHist) cycle(p int, t, ttl int64, token, v, wt int64, outcome history.Type) {
	h.add(history.Event{Time: t, Type: history.Invoke, Process: p, F: history.FAcquire, Key: "k"})
	h.add(history.Event{Time: t, Type: history.OK, Process: p, F: history.FAcquire, Key: "k", Value: "l" + strconv.Itoa(p), Token: token, Deadline: t + ttl, Nodes: []string{"n1"}})
	h.add(history.Event{Time: t + 1, Type: history.Invoke, Process: p, F: history.FRead, Key: "k"})
	h.add(history.Event{Time: t + 1, Type: history.OK, Process: p, F: history.FRead, Key: "k", Value: strconv.FormatInt(v, 10)})
	val := strconv.FormatInt(v+1, 10)
	h.add(history.Event{Time: wt, Type: history.Invoke, Process: p, F: history.FWrite, Key: "k", Value: val, Token: token, Guard: h.guard})
	h.add(history.Event{Time: wt, Type: outcome, Process: p, F: history.FWrite, Key: "k", Value: val, Token: token, Guard: h.guard})
	h.add(history.Event{Time: wt + 1, Type: history.Invoke, Process: p, F: history.FRelease, Key: "k", Value: "l" + strconv.Itoa(p)})
	h.add(history.Event{Time: wt + 1, Type: history.OK, Process: p, F: history.FRelease, Key: "k", Value: "l" + strconv.Itoa(p)})
}

func (h *counterHist) final(t, v int64) {
	h.add(history.Event{Time: t, Type: history.Invoke, Process: history.HarnessProcess, F: history.FFinal, Key: "k"})
	h.add(history.Event{Time: t, Type: history.OK, Process: history.HarnessProcess, F: history.FFinal, Key: "k", Value: strconv.FormatInt(v, 10)})
}

func (h *counterHist) pause(p int, from, to int64) {
	name := "p" + strconv.Itoa(p)
	for _, e := range []history.Event{
		{Time: from, Type: history.Invoke, F: "pause", Effect: history.EffectFault},
		{Time: from, Type: history.Info, F: "pause", Effect: history.EffectFault},
		{Time: to, Type: history.Invoke, F: "resume", Effect: history.EffectHeal},
		{Time: to, Type: history.Info, F: "resume", Effect: history.EffectHeal},
	} {
		e.Process, e.Fault, e.Nodes = history.NemesisProcess, "client-pause", []string{name}
		h.add(e)
	}
}

// sortByTime puts the events in time order, keeping each process's own order, and numbers them
// as the Recorder would.
func sortByTime(evs []history.Event) {
	// Stable insertion sort: the builders append mostly in order.
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].Time < evs[j-1].Time; j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
	for i := range evs {
		evs[i].Index = int64(i)
	}
}

func mustCheckCounter(t *testing.T, evs []history.Event) *Result {
	t.Helper()
	sortByTime(evs)
	checkStreamed(t, evs, untimed()) // lockpick check's way must give the same result
	r, err := Check(evs, untimed())
	if err != nil {
		t.Fatal(err)
	}
	if r.Resource == nil {
		t.Fatal("no resource result for a counter history")
	}
	return r
}

// pausedRun is Kleppmann's case: p0 reads 0 and is paused past its lease; p1 and p2 increment to 2
// with higher tokens; p0 then writes 1 with its old token.
func pausedRun(guard string, p0 history.Type, final int64) *counterHist {
	h := &counterHist{guard: guard}
	h.add(history.Event{Time: 0, Type: history.Invoke, Process: 0, F: history.FAcquire, Key: "k"})
	h.add(history.Event{Time: 0, Type: history.OK, Process: 0, F: history.FAcquire, Key: "k", Value: "l0", Token: 1, Deadline: 10, Nodes: []string{"n1"}})
	h.add(history.Event{Time: 1, Type: history.Invoke, Process: 0, F: history.FRead, Key: "k"})
	h.add(history.Event{Time: 1, Type: history.OK, Process: 0, F: history.FRead, Key: "k", Value: "0"})
	h.pause(0, 2, 40)
	h.cycle(1, 11, 10, 2, 0, 13, history.OK)
	h.cycle(2, 20, 10, 3, 1, 22, history.OK)
	h.add(history.Event{Time: 41, Type: history.Invoke, Process: 0, F: history.FWrite, Key: "k", Value: "1", Token: 1, Guard: guard})
	h.add(history.Event{Time: 42, Type: p0, Process: 0, F: history.FWrite, Key: "k", Value: "1", Token: 1, Guard: guard})
	h.add(history.Event{Time: 43, Type: history.Invoke, Process: 0, F: history.FRelease, Key: "k", Value: "l0"})
	h.add(history.Event{Time: 43, Type: history.Fail, Process: 0, F: history.FRelease, Key: "k", Value: "l0"})
	h.final(50, final)
	return h
}

func TestLostUpdateIsDetected(t *testing.T) {
	r := mustCheckCounter(t, pausedRun("none", history.OK, 1).evs)
	res := r.Resource
	if res.Valid != Invalid || res.Porcupine != "illegal" || res.LostUpdates != 2 {
		t.Fatalf("want data invalid with 2 lost updates, got %v, porcupine %s, %d lost\n%s", res.Valid, res.Porcupine, res.LostUpdates, r.Summary())
	}
	if r.LockValid != Valid || r.Valid != Invalid {
		t.Errorf("want lock valid and run invalid, got lock %v run %v", r.LockValid, r.Valid)
	}
	if res.StaleWriteCount != 1 || !strings.Contains(res.StaleWrites[0].Pause, "p0") || res.StaleWrites[0].NewerToken != 3 {
		t.Errorf("want p0's write listed as stale with its pause and the newer token 3: %+v", res.StaleWrites)
	}
	if r.OverrunCount != 1 {
		t.Errorf("want the paused client's overrun, got %d", r.OverrunCount)
	}
	if !strings.Contains(r.Summary(), "lock: valid (with 1 overruns), data: invalid, 2 lost updates") {
		t.Errorf("summary does not give both verdicts:\n%s", r.Summary())
	}
}

func TestFencingRejectsThePausedWrite(t *testing.T) {
	r := mustCheckCounter(t, pausedRun("fencing", history.Fail, 2).evs)
	res := r.Resource
	if res.Valid != Valid || r.Valid != Valid || res.LostUpdates != 0 || res.StaleWriteCount != 0 || res.RejectedStale != 1 {
		t.Fatalf("want data valid, no lost or stale writes, one stale write rejected:\n%s", r.Summary())
	}
	if r.OverrunCount != 1 {
		t.Errorf("the overrun check must still show the paused client, got %d overruns", r.OverrunCount)
	}
}

// A guard that accepted a token below the highest is caught by the model even when the counter
// happens to come out right.
func TestBuggyFencingGuardIsCaught(t *testing.T) {
	h := &counterHist{guard: "fencing"}
	h.cycle(0, 0, 10, 5, 0, 2, history.OK)
	h.cycle(1, 10, 10, 4, 1, 12, history.OK) // token 4 after 5 was accepted
	h.final(20, 2)
	r := mustCheckCounter(t, h.evs)
	if r.Resource.Valid != Invalid || r.Resource.Porcupine != "illegal" || r.Resource.LostUpdates != 0 {
		t.Fatalf("want illegal with no lost updates:\n%s", r.Summary())
	}
	if r.Resource.StaleWriteCount != 1 || r.Resource.StaleWrites[0].NewerToken != 5 {
		t.Errorf("want the lower-token write listed: %+v", r.Resource.StaleWrites)
	}
	// And a rejection the guard had no reason for is illegal too.
	h = &counterHist{guard: "fencing"}
	h.cycle(0, 0, 10, 5, 0, 2, history.Fail)
	h.final(20, 0)
	if r := mustCheckCounter(t, h.evs); r.Resource.Valid != Invalid {
		t.Fatalf("want an unjustified rejection illegal:\n%s", r.Summary())
	}
}

func TestCheckAndSetAndUnknownWrites(t *testing.T) {
	r := mustCheckCounter(t, pausedRun("check-and-set", history.Fail, 2).evs)
	if r.Resource.Valid != Valid {
		t.Fatalf("check-and-set rejecting the stale write: want valid:\n%s", r.Summary())
	}
	// A write of unknown outcome may have happened or not: both finals are valid, a third is not.
	for final, want := range map[int64]Verdict{1: Valid, 2: Valid, 3: Invalid} {
		h := &counterHist{guard: "none"}
		h.cycle(0, 0, 10, 0, 0, 2, history.OK)
		h.cycle(1, 10, 10, 0, 1, 12, history.Info)
		h.final(20, final)
		if r := mustCheckCounter(t, h.evs); r.Resource.Valid != want {
			t.Errorf("final %d: want %v, got %v\n%s", final, want, r.Resource.Valid, r.Summary())
		}
	}
}

func TestTokenRegressionIsFound(t *testing.T) {
	h := &counterHist{guard: "fencing"}
	h.cycle(0, 0, 10, 7, 0, 2, history.OK)
	h.add(history.Event{Time: 5, Type: history.Invoke, Process: history.NemesisProcess, F: "kill", Fault: "restart", Effect: history.EffectFault, Nodes: []string{"n1"}})
	h.add(history.Event{Time: 6, Type: history.Info, Process: history.NemesisProcess, F: "kill", Fault: "restart", Effect: history.EffectFault, Nodes: []string{"n1"}})
	h.cycle(1, 10, 10, 1, 1, 12, history.Fail)
	h.cycle(2, 14, 10, 2, 1, 16, history.Fail)
	h.final(20, 1)
	r := mustCheckCounter(t, h.evs)
	if r.TokenRegressionCount != 2 || len(r.TokenRegressions) != 1 || r.LockValid != Invalid || r.Resource.Valid != Valid {
		t.Fatalf("want one token regression, lock invalid, data valid:\n%s", r.Summary())
	}
	if c := r.TokenRegressions[0].Cause; !strings.Contains(c, "kill n1") {
		t.Errorf("cause does not name the kill: %q", c)
	}
}

// Many sequential increments are cut into segments; a long valid history checks quickly and a lost
// update deep inside it is still found.
func TestCounterSegments(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	for _, lose := range []bool{false, true} {
		h := &counterHist{guard: "none"}
		v := int64(0)
		for i := range 2000 {
			t0 := int64(i * 10)
			read := v
			if lose && i == 1500 {
				read = v - 1
			}
			h.cycle(i%7, t0, 8, 0, read, t0+3, history.OK)
			v = read + 1
		}
		h.final(30000, v)
		r := mustCheckCounter(t, h.evs)
		want := Valid
		if lose {
			want = Invalid
		}
		if r.Resource.Valid != want || r.Resource.Segments < 1000 {
			t.Errorf("lose=%v: want %v in many segments, got %v in %d\n%s", lose, want, r.Resource.Valid, r.Resource.Segments, r.Summary())
		}
	}
}

// A token that goes back across a failover: the cause names the kill of the earlier primary and the
// promotion of the later one, announced just after its grant.
func TestTokenRegressionAcrossAFailoverNamesThePromotion(t *testing.T) {
	h := &counterHist{guard: "fencing"}
	h.cycle(0, 0, 10, 7, 0, 2, history.OK)
	h.add(history.Event{Time: 5, Type: history.Invoke, Process: history.NemesisProcess, F: "kill", Fault: "failover", Effect: history.EffectFault, Nodes: []string{"n1"}, Roles: map[string]string{"n1": "primary"}})
	h.add(history.Event{Time: 6, Type: history.Info, Process: history.NemesisProcess, F: "kill", Fault: "failover", Effect: history.EffectFault, Nodes: []string{"n1"}})
	h.cycle(1, 10, 10, 7, 1, 12, history.Fail)
	for i := range h.evs {
		if e := &h.evs[i]; e.Process == 1 && e.F == history.FAcquire && e.Type == history.OK {
			e.Nodes = []string{"n2"}
		}
	}
	h.add(history.Event{Time: 11, Type: history.Info, Process: history.SystemProcess, F: history.FRole, Nodes: []string{"n1", "n2"}, Roles: map[string]string{"n1": "replica", "n2": "primary"}, Note: "roles: n2 primary, n1 replica"})
	h.final(20, 1)
	r := mustCheckCounter(t, h.evs)
	if len(r.TokenRegressions) != 1 {
		t.Fatalf("want one token regression:\n%s", r.Summary())
	}
	c := r.TokenRegressions[0].Cause
	for _, want := range []string{"n1 gave the earlier token", "kill n1", "n2 was promoted to primary", "had not seen n1's last increments"} {
		if !strings.Contains(c, want) {
			t.Errorf("cause %q lacks %q", c, want)
		}
	}
}

// An etcd mutex asked again on the same session after its release failed hands back its own key,
// with the same revision as token: one hold that went on, not a regression. After a release that
// completed, the same token again is one.
func TestSameLeaseGrantedAgainToItsHolder(t *testing.T) {
	for _, releaseOK := range []bool{false, true} {
		h := &hist{}
		tok := func(e history.Event) history.Event { e.Token = 7; return e }
		h.add(history.Event{Time: 0, Type: history.Invoke, Process: 1, F: history.FAcquire, Key: "k"})
		h.add(tok(history.Event{Time: 1, Type: history.OK, Process: 1, F: history.FAcquire, Key: "k", Value: "k@7", Deadline: 1000, Nodes: []string{"e1"}}))
		h.add(history.Event{Time: 2, Type: history.Invoke, Process: 1, F: history.FRelease, Key: "k", Value: "k@7"})
		if releaseOK {
			h.add(history.Event{Time: 3, Type: history.OK, Process: 1, F: history.FRelease, Key: "k", Value: "k@7"})
		} else {
			h.add(history.Event{Time: 3, Type: history.Fail, Process: 1, F: history.FRelease, Key: "k", Value: "k@7", Error: "etcdserver: no leader"})
		}
		h.add(history.Event{Time: 4, Type: history.Invoke, Process: 1, F: history.FAcquire, Key: "k"})
		h.add(tok(history.Event{Time: 5, Type: history.OK, Process: 1, F: history.FAcquire, Key: "k", Value: "k@7", Deadline: 1000, Nodes: []string{"e1"}}))
		h.release(1, "k", "k@7", 6, 7)
		r := mustCheck(t, h.events())
		want := 0
		if releaseOK {
			want = 1
		}
		if r.TokenRegressionCount != want {
			t.Errorf("release ok %v: %d token regressions, want %d\n%s", releaseOK, r.TokenRegressionCount, want, r.Summary())
		}
	}
}

// The lost update under fencing that curator's card showed (seed 4): a paused holder's write lands
// between the next holder's read and its write. With reads that register their tokens the guard
// refuses it and the history is valid; a guard that accepted it anyway is illegal even where the
// counter comes out right, and the accepted write followed by the next holder's is a lost update.
func TestFencedReadRefusesTheStaleWriteBetweenReadAndWrite(t *testing.T) {
	run := func(staleOutcome history.Type, nextWrites bool, final int64) *Result {
		h := &counterHist{guard: "fencing"}
		ev := func(tm int64, typ history.Type, p int, f, val string, token int64) {
			h.add(history.Event{Time: tm, Type: typ, Process: p, F: f, Key: "k", Value: val, Token: token, Guard: map[bool]string{true: "fencing"}[f == history.FWrite]})
		}
		ev(0, history.Invoke, 7, history.FAcquire, "", 0)
		h.add(history.Event{Time: 0, Type: history.OK, Process: 7, F: history.FAcquire, Key: "k", Value: "l7", Token: 365, Deadline: 10, Nodes: []string{"n1"}})
		ev(1, history.Invoke, 7, history.FRead, "", 365)
		ev(2, history.OK, 7, history.FRead, "0", 365)
		ev(50, history.Invoke, 0, history.FAcquire, "", 0)
		h.add(history.Event{Time: 50, Type: history.OK, Process: 0, F: history.FAcquire, Key: "k", Value: "l0", Token: 399, Deadline: 90, Nodes: []string{"n1"}})
		ev(51, history.Invoke, 0, history.FRead, "", 399)
		ev(53, history.OK, 0, history.FRead, "0", 399)
		ev(55, history.Invoke, 7, history.FWrite, "1", 365)
		ev(57, staleOutcome, 7, history.FWrite, "1", 365)
		if nextWrites {
			ev(60, history.Invoke, 0, history.FWrite, "1", 399)
			ev(61, history.OK, 0, history.FWrite, "1", 399)
		}
		h.final(70, final)
		return mustCheckCounter(t, h.evs)
	}
	if r := run(history.Fail, true, 1); r.Resource.Valid != Valid {
		t.Fatalf("the stale write refused: want valid:\n%s", r.Summary())
	}
	r := run(history.OK, true, 1)
	if r.Resource.Valid != Invalid || r.Resource.LostUpdates != 1 {
		t.Fatalf("the stale write accepted, then the next holder's: want one lost update:\n%s", r.Summary())
	}
	if s := r.Resource.Illegal; s == nil || *s != (IllegalStretch{Key: "k", From: 1, Until: 61}) {
		t.Errorf("illegal stretch %+v, want key k from p7's read (1) to p0's write (61)", s)
	}
	// Without the stale write (p7's lease had ended) the lost update is timed at the end of the
	// stretch porcupine could not linearize.
	data := *r.Resource
	data.StaleWrites = nil
	if f := firstFinding(&Result{Resource: &data}, Never); f == nil || f.Kind != FindingLostUpdate || f.At != 61 {
		t.Errorf("first finding of the data alone %+v, want the lost update at 61", f)
	}
	if r := run(history.OK, false, 1); r.Resource.Valid != Invalid || r.Resource.Porcupine != "illegal" {
		t.Fatalf("a write below a token read accepted: want illegal:\n%s", r.Summary())
	}
}
