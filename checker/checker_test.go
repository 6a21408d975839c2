package checker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockpick-dev/lockpick/history"
)

const ms = int64(time.Millisecond)

// hist builds a history by hand; times are in milliseconds.
type hist struct{ evs []history.Event }

func (h *hist) add(e history.Event) *hist {
	e.Time *= ms
	e.Deadline *= ms
	h.evs = append(h.evs, e)
	return h
}

// acquire adds an acquire of key by p invoked at inv and completing with typ at done; an ok one gets
// value and deadline.
func (h *hist) acquire(p int, key string, inv, done int64, typ history.Type, value string, deadline int64) *hist {
	h.add(history.Event{Time: inv, Type: history.Invoke, Process: p, F: history.FAcquire, Key: key})
	e := history.Event{Time: done, Type: typ, Process: p, F: history.FAcquire, Key: key}
	if typ == history.OK {
		e.Value, e.Deadline, e.Nodes = value, deadline, []string{"n1", "n2", "n3"}
	}
	return h.add(e)
}

func (h *hist) op(p int, f, key, value string, inv, done int64) *hist {
	h.add(history.Event{Time: inv, Type: history.Invoke, Process: p, F: f, Key: key, Value: value})
	return h.add(history.Event{Time: done, Type: history.OK, Process: p, F: f, Key: key, Value: value})
}

func (h *hist) release(p int, key, value string, inv, done int64) *hist {
	return h.op(p, history.FRelease, key, value, inv, done)
}

func (h *hist) work(p int, key, value string, inv, done int64) *hist {
	return h.op(p, history.FWork, key, value, inv, done)
}

func (h *hist) nemesis(f, fault, effect string, nodes []string, inv, done int64) *hist {
	h.add(history.Event{Time: inv, Type: history.Invoke, Process: -1, F: f, Fault: fault, Effect: effect, Nodes: nodes})
	return h.add(history.Event{Time: done, Type: history.Info, Process: -1, F: f, Fault: fault, Effect: effect, Nodes: nodes})
}

// events returns the history in time order (stable, so each process keeps its own order).
func (h *hist) events() []history.Event {
	evs := slices.Clone(h.evs)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Time < evs[j].Time })
	for i := range evs {
		evs[i].Index = int64(i)
	}
	return evs
}

// untimed is the default options with no limit on porcupine's time: the tests that expect porcupine
// to decide must not get "the sweep decided" because a loaded machine ran them slowly (issue 28);
// TestPorcupineTimeoutLeavesSegmentsToTheSweep tests the limit itself.
func untimed() Options { return Options{Timeout: -1} }

func mustCheck(t *testing.T, evs []history.Event) *Result {
	t.Helper()
	checkStreamed(t, evs, untimed()) // lockpick check's way must give the same result
	r, err := Check(evs, untimed())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(r.Errors) > 0 {
		t.Fatalf("checker errors: %v", r.Errors)
	}
	// Every result must render; Visualize runs porcupine's own replay of the linearization.
	var buf bytes.Buffer
	if err := r.Visualize(&buf); err != nil {
		t.Fatalf("Visualize: %v", err)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatalf("marshal result: %v", err)
	}
	return r
}

func TestHandOffAtTheSameInstantIsValid(t *testing.T) {
	// p0 holds from 10 until it invokes its release at 50; p1's acquire, invoked at 20 while p0
	// held, completes exactly at 50. Porcupine orders calls before returns at equal times, so this
	// is a legal hand-off.
	h := (&hist{}).
		acquire(0, "k", 0, 10, history.OK, "a", 1000).
		acquire(1, "k", 20, 50, history.OK, "b", 1000).
		release(0, "k", "a", 50, 60).
		release(1, "k", "b", 80, 90)
	r := mustCheck(t, h.events())
	if r.Valid != Valid || r.Porcupine != "ok" || r.ViolationCount != 0 {
		t.Fatalf("want valid, got %s / porcupine %s / %d violations\n%s", r.Valid, r.Porcupine, r.ViolationCount, r.Summary())
	}
	// p0's hold is cut at 11 (before p1 invoked); the touching hand-off lands in the second
	// segment, with p0's hold carried in, so porcupine still decides it.
	if r.Segments != 2 {
		t.Errorf("want 2 segments, got %d", r.Segments)
	}
	whole, err := check(&history.Log{Events: h.events()}, Options{}, false)
	if err != nil || whole.Valid != Valid || whole.Segments != 1 {
		t.Fatalf("without cuts: want valid in 1 segment, got %v, %v", whole, err)
	}
}

func TestOverlappingHoldsAreInvalid(t *testing.T) {
	h := (&hist{}).
		acquire(3, "k", 0, 10, history.OK, "a", 1000).
		acquire(7, "k", 40, 50, history.OK, "b", 1000).
		release(3, "k", "a", 100, 110).
		release(7, "k", "b", 150, 160)
	r := mustCheck(t, h.events())
	if r.Valid != Invalid || r.Porcupine != "illegal" {
		t.Fatalf("want invalid/illegal, got %s/%s", r.Valid, r.Porcupine)
	}
	if r.ViolationCount != 1 || len(r.Violations) != 1 {
		t.Fatalf("want 1 violation, got %d (%d listed)", r.ViolationCount, len(r.Violations))
	}
	v := r.Violations[0]
	procs := []int{v.A.Process, v.B.Process}
	slices.Sort(procs)
	if !slices.Equal(procs, []int{3, 7}) {
		t.Errorf("violation names processes %v, want 3 and 7", procs)
	}
	if v.OverlapStart != 50*ms || v.OverlapEnd != 100*ms || v.Overlap != 50*ms {
		t.Errorf("overlap [%d, %d] len %d, want [50ms, 100ms] len 50ms", v.OverlapStart, v.OverlapEnd, v.Overlap)
	}
	if v.A.EndedBy != "release" || !slices.Equal(v.A.Nodes, []string{"n1", "n2", "n3"}) {
		t.Errorf("hold A: ended by %q, nodes %v", v.A.EndedBy, v.A.Nodes)
	}
	for _, want := range []string{"p3 held [0.010s, 0.100s]", "p7 held [0.050s, 0.150s]", "overlap 50.0ms"} {
		if !strings.Contains(v.Description, want) || !strings.Contains(r.Summary(), want) {
			t.Errorf("description/summary lacks %q: %s", want, v.Description)
		}
	}
	if r.Valid.ExitCode() != 1 {
		t.Errorf("exit code %d, want 1", r.Valid.ExitCode())
	}
}

func TestExpiryEndsTheHold(t *testing.T) {
	// p0 never releases; its lease ends at its deadline, 100.
	base := func() *hist { return (&hist{}).acquire(0, "k", 0, 10, history.OK, "a", 100) }

	after := base().acquire(1, "k", 105, 110, history.OK, "b", 300).release(1, "k", "b", 200, 210)
	r := mustCheck(t, after.events())
	if r.Valid != Valid {
		t.Fatalf("acquire after the deadline: want valid, got %s\n%s", r.Valid, r.Summary())
	}

	before := base().acquire(1, "k", 80, 90, history.OK, "b", 300).release(1, "k", "b", 200, 210)
	r = mustCheck(t, before.events())
	if r.Valid != Invalid || r.ViolationCount != 1 {
		t.Fatalf("acquire before the deadline: want invalid with 1 violation, got %s, %d", r.Valid, r.ViolationCount)
	}
	v := r.Violations[0]
	if v.A.EndedBy != "expiry" || v.A.End != 100*ms || v.Overlap != 10*ms {
		t.Errorf("want A ended by expiry at 100ms with a 10ms overlap, got %q at %d, overlap %d", v.A.EndedBy, v.A.End, v.Overlap)
	}
}

func TestFailAndInfoAcquiresMakeNoHolds(t *testing.T) {
	h := (&hist{}).
		acquire(0, "k", 0, 10, history.OK, "a", 1000).
		acquire(1, "k", 20, 200, history.Info, "", 0). // spans p0's whole hold
		acquire(2, "k", 30, 35, history.Fail, "", 0).
		release(0, "k", "a", 100, 110)
	r := mustCheck(t, h.events())
	if r.Valid != Valid || r.Stats.Holds != 1 {
		t.Fatalf("want valid with 1 hold, got %s with %d", r.Valid, r.Stats.Holds)
	}
	want := Counts{OK: 1, Fail: 1, Info: 1}
	if r.Stats.Acquires != want || r.Stats.AcquiresByKey["k"] != want {
		t.Errorf("acquire counts %+v / %+v, want %+v", r.Stats.Acquires, r.Stats.AcquiresByKey["k"], want)
	}
	if r.Stats.Releases != (Counts{OK: 1}) || r.Stats.Processes != 3 {
		t.Errorf("releases %+v, processes %d", r.Stats.Releases, r.Stats.Processes)
	}
	if got := r.Stats.AcquiresOKShare; got < 0.333 || got > 0.334 {
		t.Errorf("acquires ok %v, want 1/3", got)
	}
	if r.Stats.LatencyOK.Max != 10 || r.Stats.LatencyAll.Max != 180 || r.Stats.LatencyAll.Count != 3 {
		t.Errorf("latencies ok %+v all %+v", r.Stats.LatencyOK, r.Stats.LatencyAll)
	}
}

func TestWorkPastTheDeadlineIsAnOverrun(t *testing.T) {
	h := (&hist{}).
		acquire(0, "k", 0, 10, history.OK, "a", 100).
		work(0, "k", "a", 20, 150).
		release(0, "k", "a", 160, 170).
		acquire(1, "k", 120, 130, history.OK, "b", 400). // after p0's deadline: legal at lock level
		release(1, "k", "b", 200, 210)
	r := mustCheck(t, h.events())
	if r.Valid != Valid {
		t.Fatalf("overruns must not change the verdict; got %s", r.Valid)
	}
	if r.OverrunCount != 1 || len(r.Overruns) != 1 {
		t.Fatalf("want 1 overrun, got %d", r.OverrunCount)
	}
	o := r.Overruns[0]
	if o.Process != 0 || o.Key != "k" || o.Value != "a" || o.Deadline != 100*ms || o.WorkEnd != 150*ms || o.Past != 50*ms {
		t.Errorf("overrun %+v", o)
	}
}

func TestKeysAreIndependent(t *testing.T) {
	h := (&hist{}).
		acquire(0, "k1", 0, 10, history.OK, "a", 1000).
		acquire(1, "k2", 20, 30, history.OK, "b", 1000).
		release(0, "k1", "a", 100, 110).
		release(1, "k2", "b", 100, 110)
	r := mustCheck(t, h.events())
	if r.Valid != Valid || r.Segments != 2 {
		t.Fatalf("overlap on different keys: want valid in 2 segments, got %s in %d", r.Valid, r.Segments)
	}
	if r.Stats.AcquiresByKey["k1"].OK != 1 || r.Stats.AcquiresByKey["k2"].OK != 1 {
		t.Errorf("per-key counts %+v", r.Stats.AcquiresByKey)
	}
}

// A lease already past its deadline when its acquire completed grants no hold: the client could
// never use it, so it cannot overlap the legal holder (once a false invalid).
func TestExpiredOnArrivalGrantsNoHold(t *testing.T) {
	h := (&hist{}).
		acquire(0, "k", 0, 10, history.OK, "a", 1000).
		acquire(1, "k", 20, 50, history.OK, "b", 40).
		release(1, "k", "b", 55, 56).
		release(0, "k", "a", 100, 110)
	r := mustCheck(t, h.events())
	if r.Valid != Valid || r.ViolationCount != 0 || r.Stats.Holds != 1 || r.Stats.ExpiredOnArrival != 1 {
		t.Fatalf("want valid with 1 hold and 1 lease expired on arrival, got %s, %d violations, %d holds, %d expired\n%s",
			r.Valid, r.ViolationCount, r.Stats.Holds, r.Stats.ExpiredOnArrival, r.Summary())
	}
	if !containsSubstring(r.Notes, "expired on arrival") || !strings.Contains(r.Summary(), "1 ok acquires expired on arrival") {
		t.Errorf("notes %v and summary should count the lease expired on arrival", r.Notes)
	}
	if containsSubstring(r.Notes, "matched no open hold") {
		t.Errorf("the release of the expired lease must still find it: %v", r.Notes)
	}
	// Work under it is still an overrun.
	h = (&hist{}).
		acquire(1, "k", 20, 50, history.OK, "b", 40).
		work(1, "k", "b", 51, 60)
	if r := mustCheck(t, h.events()); r.OverrunCount != 1 {
		t.Errorf("work under an expired lease: %d overruns, want 1", r.OverrunCount)
	}
	// A deadline exactly at the completion is expired too: nothing of the lease is left.
	h = (&hist{}).
		acquire(0, "k", 0, 10, history.OK, "a", 1000).
		acquire(1, "k", 20, 50, history.OK, "b", 50).
		release(0, "k", "a", 100, 110)
	if r := mustCheck(t, h.events()); r.Valid != Valid || r.Stats.ExpiredOnArrival != 1 {
		t.Errorf("deadline at completion: %s, %d expired", r.Valid, r.Stats.ExpiredOnArrival)
	}
}

func TestNemesisEventsInsideAnOverlapAreListed(t *testing.T) {
	h := (&hist{}).
		nemesis("kill", "restart", history.EffectFault, []string{"n1", "n2", "n3"}, 30, 35).
		acquire(3, "k", 0, 10, history.OK, "a", 1000).
		acquire(7, "k", 40, 50, history.OK, "b", 1000).
		release(3, "k", "a", 100, 110).
		release(7, "k", "b", 150, 160).
		nemesis("start", "restart", history.EffectHeal, []string{"n1", "n2", "n3"}, 500, 510)
	r := mustCheck(t, h.events())
	if r.ViolationCount != 1 {
		t.Fatalf("want 1 violation, got %d", r.ViolationCount)
	}
	nem := r.Violations[0].Nemesis
	if len(nem) != 2 || nem[0].F != "kill" || nem[0].Type != history.Invoke || nem[1].Type != history.Info {
		t.Fatalf("want the kill invoke and its completion, got %+v", nem)
	}
	if !slices.Equal(nem[0].Nodes, []string{"n1", "n2", "n3"}) || nem[0].Fault != "restart" || nem[0].Effect != history.EffectFault {
		t.Errorf("nemesis event lost fields: %+v", nem[0])
	}
	if !strings.Contains(r.Violations[0].Description, "faults inside: kill n1 n2 n3 at 0.030s") {
		t.Errorf("description: %s", r.Violations[0].Description)
	}
}

func TestFaultWindows(t *testing.T) {
	h := (&hist{}).
		nemesis("kill", "restart", history.EffectFault, []string{"n1", "n2"}, 100, 110).
		nemesis("start", "restart", history.EffectHeal, []string{"n1"}, 200, 210).
		acquire(0, "k", 240, 250, history.OK, "a", 2000). // inside the restart window
		release(0, "k", "a", 260, 270).
		nemesis("start", "restart", history.EffectHeal, []string{"n2"}, 300, 320).
		acquire(0, "k", 340, 350, history.OK, "b", 2000). // between the windows
		release(0, "k", "b", 360, 370).
		nemesis("partition", "partition", history.EffectFault, []string{"n3"}, 400, 405).
		acquire(0, "k", 440, 450, history.OK, "c", 2000). // inside the unhealed partition
		release(0, "k", "c", 460, 1000)
	// A fault that failed did not happen.
	h.add(history.Event{Time: 600, Type: history.Invoke, Process: -1, F: "pause", Fault: "pause", Effect: history.EffectFault, Nodes: []string{"n1"}})
	h.add(history.Event{Time: 601, Type: history.Fail, Process: -1, F: "pause", Fault: "pause", Effect: history.EffectFault})
	r := mustCheck(t, h.events())
	want := []FaultWindow{
		{Fault: "restart", F: "kill", Nodes: []string{"n1", "n2"}, Start: 100 * ms, End: 320 * ms, Healed: true},
		{Fault: "partition", F: "partition", Nodes: []string{"n3"}, Start: 400 * ms, End: 1000 * ms, Healed: false},
	}
	if len(r.Faults) != len(want) {
		t.Fatalf("fault windows %+v, want %+v", r.Faults, want)
	}
	for i := range want {
		g := r.Faults[i]
		if g.Fault != want[i].Fault || g.F != want[i].F || !slices.Equal(g.Nodes, want[i].Nodes) ||
			g.Start != want[i].Start || g.End != want[i].End || g.Healed != want[i].Healed {
			t.Errorf("window %d: got %+v, want %+v", i, g, want[i])
		}
	}
	if r.Stats.OKInFaults != 2 || r.Stats.OKOutsideFaults != 1 {
		t.Errorf("ok acquires in/out of faults: %d/%d, want 2/1", r.Stats.OKInFaults, r.Stats.OKOutsideFaults)
	}
	if g := r.Faults[0]; g.Applied != 110*ms || g.Lifted != 300*ms {
		t.Errorf("restart window certain from %d to %d, want 110ms to 300ms", g.Applied, g.Lifted)
	}
	if r.Stats.OKWhollyInFaults != 2 {
		t.Errorf("ok acquires wholly in faults: %d, want 2", r.Stats.OKWhollyInFaults)
	}
	// An acquire invoked before the fault took effect may have slipped through before it.
	early := (&hist{}).
		acquire(0, "k", 100, 120, history.OK, "a", 2000).
		release(0, "k", "a", 130, 140).
		nemesis("cut", "partition", history.EffectFault, []string{"n1"}, 105, 110).
		nemesis("heal", "partition", history.EffectHeal, nil, 200, 210)
	if r := mustCheck(t, early.events()); r.Stats.OKInFaults != 1 || r.Stats.OKWhollyInFaults != 0 {
		t.Errorf("acquire invoked before the fault: in %d, wholly %d; want 1, 0", r.Stats.OKInFaults, r.Stats.OKWhollyInFaults)
	}
}

// A history that exercised nothing is never valid: it is unknown, with the reason.
func TestNothingExercisedIsUnknown(t *testing.T) {
	cases := map[string]struct {
		evs    []history.Event
		reason string
	}{
		"empty":        {nil, "the history is empty"},
		"only a fail":  {(&hist{}).acquire(0, "k", 0, 5, history.Fail, "", 0).events(), "no lock was granted on key k"},
		"only nemesis": {(&hist{}).nemesis("kill", "restart", history.EffectFault, []string{"n1"}, 0, 5).events(), "no acquire"},
	}
	for name, c := range cases {
		r := mustCheck(t, c.evs)
		if r.Valid != Unknown || r.Evidence.Enough || !strings.Contains(r.UnknownReason, c.reason) {
			t.Errorf("%s: want unknown because %q, got %s because %q", name, c.reason, r.Valid, r.UnknownReason)
		}
		if !strings.Contains(r.Summary(), "unknown because "+r.UnknownReason) {
			t.Errorf("%s: summary does not give the reason:\n%s", name, r.Summary())
		}
	}
}

func TestMalformedHistoriesAreErrors(t *testing.T) {
	cases := map[string][]history.Event{
		"completion without invoke": {{Time: 1, Type: history.OK, Process: 0, F: history.FAcquire, Key: "k"}},
		"two in flight": {
			{Time: 1, Type: history.Invoke, Process: 0, F: history.FAcquire, Key: "k"},
			{Index: 1, Time: 2, Type: history.Invoke, Process: 0, F: history.FRelease, Key: "k"},
		},
		"mismatched f": {
			{Time: 1, Type: history.Invoke, Process: 0, F: history.FAcquire, Key: "k"},
			{Index: 1, Time: 2, Type: history.OK, Process: 0, F: history.FRelease, Key: "k"},
		},
		"completion before invoke": {
			{Time: 5, Type: history.Invoke, Process: 0, F: history.FAcquire, Key: "k"},
			{Index: 1, Time: 2, Type: history.OK, Process: 0, F: history.FAcquire, Key: "k", Deadline: 100},
		},
		"unknown type":    {{Time: 1, Type: "done", Process: 0, F: history.FAcquire}},
		"invalid process": {{Time: 1, Type: history.Invoke, Process: -2, F: history.FAcquire}},
	}
	for name, evs := range cases {
		if r, err := Check(evs, Options{}); err == nil {
			t.Errorf("%s: want an error, got verdict %s", name, r.Valid)
		}
	}
	// An operation still in flight when the history ends is indeterminate, not an error.
	r := mustCheck(t, []history.Event{{Time: 1, Type: history.Invoke, Process: 0, F: history.FAcquire, Key: "k"}})
	if r.Stats.Acquires.Pending != 1 || !containsSubstring(r.Notes, "in flight") {
		t.Errorf("pending acquire: stats %+v, notes %v", r.Stats.Acquires, r.Notes)
	}
}

// Segments porcupine has no time for are decided by the interval sweep alone, which is exact, and
// the result says so.
func TestPorcupineTimeoutLeavesSegmentsToTheSweep(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	evs := Generate(7, 20000, 1)
	r, err := Check(evs, Options{Timeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid != Valid || r.Porcupine != "unknown" || !strings.HasPrefix(r.DecidedBy, "sweep (") {
		t.Fatalf("want valid decided by the sweep, got %s (porcupine %s, decided by %q)", r.Valid, r.Porcupine, r.DecidedBy)
	}
	if !containsSubstring(r.Notes, "ran out of time") || !strings.Contains(r.Summary(), "decided by: sweep") {
		t.Errorf("notes %v; summary:\n%s", r.Notes, r.Summary())
	}
	// With time enough porcupine decides every segment, and the sweep agrees.
	if r := mustCheck(t, evs); r.Valid != Valid || r.DecidedBy != "porcupine+sweep" {
		t.Fatalf("generated history: want valid by porcupine+sweep, got %s by %q\n%s", r.Valid, r.DecidedBy, r.Summary())
	}
}

func TestTimeoutWithAnOverlapIsInvalid(t *testing.T) {
	// The sweep's overlap is a counterexample whether or not porcupine finished.
	evs := Generate(7, 20000, 1)
	last := evs[len(evs)-1].Time
	extra := (&hist{}).
		acquire(1000, "k0", 0, 1, history.OK, "x", 1<<40).
		acquire(1001, "k0", 2, 3, history.OK, "y", 1<<40).events()
	for _, e := range extra {
		e.Index = int64(len(evs))
		e.Time += last + 1
		if e.Deadline != 0 {
			e.Deadline = last + 1e12
		}
		evs = append(evs, e)
	}
	r, err := Check(evs, Options{Timeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid != Invalid || r.ViolationCount != 1 || len(r.Errors) != 0 {
		t.Fatalf("want invalid with 1 violation, got %s, %d, errors %v", r.Valid, r.ViolationCount, r.Errors)
	}
}

func TestDecide(t *testing.T) {
	seg := func(res porcupine.CheckResult, violations int) segment {
		return segment{holds: []int32{0}, result: resultOf(res), violations: int32(violations)}
	}
	cases := []struct {
		segs     []segment
		out      porcupineOutcome
		overlaps int
		want     Verdict
		errs     int
		by       string
	}{
		{[]segment{seg(porcupine.Ok, 0)}, porcupineOutcome{}, 0, Valid, 0, "porcupine+sweep"},
		{[]segment{seg(porcupine.Illegal, 2)}, porcupineOutcome{}, 2, Invalid, 0, "porcupine+sweep"},
		{[]segment{seg(porcupine.Unknown, 1)}, porcupineOutcome{timedOut: 1}, 1, Invalid, 0, "sweep (1 segment porcupine had no time left for)"},
		{[]segment{seg(porcupine.Unknown, 0)}, porcupineOutcome{tooLarge: 1}, 0, Valid, 0, "sweep (1 segment too long for porcupine)"},
		{[]segment{seg(porcupine.Ok, 0), seg(porcupine.Unknown, 0)}, porcupineOutcome{tooLarge: 1}, 0, Valid, 0, "porcupine+sweep, the sweep alone on 1 of 2 segments (1 segment too long for porcupine)"},
		{[]segment{seg(porcupine.Ok, 1)}, porcupineOutcome{}, 1, Unknown, 1, "porcupine+sweep"},
		{[]segment{seg(porcupine.Illegal, 0)}, porcupineOutcome{}, 0, Unknown, 1, "porcupine+sweep"},
		{nil, porcupineOutcome{}, 0, Valid, 0, "nothing to decide (no holds)"},
	}
	for i, c := range cases {
		var errs []string
		got, by := decide([]hold{{key: "k"}}, c.segs, nil, c.out, c.overlaps, &errs)
		if got != c.want || len(errs) != c.errs || by != c.by {
			t.Errorf("case %d: got %s with %d errors by %q, want %s with %d by %q", i, got, len(errs), by, c.want, c.errs, c.by)
		}
	}
}

func TestVerdictJSON(t *testing.T) {
	for v, want := range map[Verdict]string{Valid: "true", Invalid: "false", Unknown: `"unknown"`} {
		b, err := json.Marshal(v)
		if err != nil || string(b) != want {
			t.Errorf("marshal %v: %s, %v; want %s", v, b, err, want)
		}
		var back Verdict = 42
		if err := json.Unmarshal(b, &back); err != nil || back != v {
			t.Errorf("round trip of %s: got %v, %v", want, back, err)
		}
	}
	var v Verdict
	if err := json.Unmarshal([]byte(`"maybe"`), &v); err == nil {
		t.Error("unmarshal of \"maybe\" must fail")
	}
	if err := json.Unmarshal([]byte(`3`), &v); err == nil {
		t.Error("unmarshal of 3 must fail")
	}
	// Inside a result too.
	r := &Result{Valid: Unknown}
	b, _ := json.Marshal(r)
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || back.Valid != Unknown || !bytes.Contains(b, []byte(`"valid":"unknown"`)) {
		t.Errorf("result round trip: %s -> %v, %v", b, back.Valid, err)
	}
	if err := back.Visualize(&bytes.Buffer{}); err == nil {
		t.Error("Visualize on a result not made by Check must fail, not panic")
	}
}

func TestFormatTime(t *testing.T) {
	for ns, want := range map[int64]string{12345 * ms: "12.345s", 0: "0.000s", 1500 * int64(time.Microsecond): "0.002s", Never: "never"} {
		if got := FormatTime(ns); got != want {
			t.Errorf("FormatTime(%d) = %q, want %q", ns, got, want)
		}
	}
}

func TestLargeHistoryVisualizesOnlyFailingSegments(t *testing.T) {
	h := (&hist{}).
		acquire(3, "k", 0, 10, history.OK, "a", 1000).
		acquire(7, "k", 40, 50, history.OK, "b", 1000).
		release(3, "k", "a", 100, 110).
		release(7, "k", "b", 150, 160)
	for i := int64(0); i < 20; i++ { // 20 more single-hold segments
		h.acquire(1, "k", 1000+10*i, 1001+10*i, history.OK, "c", 1005+10*i)
	}
	r, err := Check(h.events(), Options{MaxVisualizedOps: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid != Invalid || r.Segments != 22 {
		t.Fatalf("want invalid in 22 segments, got %s in %d", r.Valid, r.Segments)
	}
	if !containsSubstring(r.Notes, "shows only the 1 segments") {
		t.Errorf("notes %v should say the visualization is partial", r.Notes)
	}
	var buf bytes.Buffer
	if err := r.Visualize(&buf); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{"lockpick: the history has 46 porcupine operations", "p3 and p7 overlap", "acquire p7 k v=b", "acquire p3 k v=a (held since 0.010s, carried in"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(html, "acquire p1 ") {
		t.Error("HTML shows a segment that neither failed nor holds a violation")
	}
}

func containsSubstring(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestContendedChainIsCutAtHeldPoints(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	// Every acquire is invoked while the previous hold is still in effect and completes after it
	// ended, so there is no quiet point at all: without held cuts this would be one segment of
	// 2n operations, more than maxSegmentOps: too large for porcupine.
	h := &hist{}
	const n = maxSegmentOps/2 + 500
	for i := int64(0); i < n; i++ {
		v := fmt.Sprint(i)
		h.acquire(int(i%10), "k", 10*i+97, 10*i+101, history.OK, v, 10*i+1000)
		h.release(int(i%10), "k", v, 10*i+110, 10*i+111)
	}
	r := mustCheck(t, h.events())
	if r.Valid != Valid || r.Porcupine != "ok" || r.Segments != n {
		t.Fatalf("want valid/ok in %d segments, got %s/%s in %d\n%s", n, r.Valid, r.Porcupine, r.Segments, r.Summary())
	}
	// Break one hand-off: hold 500's acquire completes before hold 499 ended.
	evs := h.events()
	for i := range evs {
		if e := &evs[i]; e.F == history.FAcquire && e.Type == history.OK && e.Value == "500" {
			e.Time = (10*500 + 99) * ms // invoked at 5097, hold 499 ends at 5100
		}
	}
	sortByTime(evs)
	r = mustCheck(t, evs)
	if r.Valid != Invalid || r.Porcupine != "illegal" || r.ViolationCount != 1 {
		t.Fatalf("want one violation, got %s/%s, %d", r.Valid, r.Porcupine, r.ViolationCount)
	}
}

// The cause names the nodes that granted both leases and the fault that made them forget the first;
// with no such fault it says the lock itself let the second client in.
func TestViolationCause(t *testing.T) {
	faulted := (&hist{}).
		acquire(3, "k", 0, 10, history.OK, "a", 1000).
		nemesis("kill", "restart", history.EffectFault, []string{"n2", "n3"}, 20, 25).
		nemesis("kill", "restart", history.EffectFault, []string{"n1"}, 26, 27).
		acquire(7, "k", 40, 50, history.OK, "b", 1000).
		release(3, "k", "a", 100, 110).
		release(7, "k", "b", 150, 160)
	r := mustCheck(t, faulted.events())
	if got := r.Violations[0].Cause; !strings.Contains(got, "n1 n2 n3 granted p3's lease and then p7's: they lost p3's key to restart kill n2 n3 at 0.020s; restart kill n1 at 0.026s (after p3's grant)") {
		t.Errorf("cause: %s", got)
	}
	if !strings.Contains(r.Summary(), "cause: n1 n2 n3") {
		t.Errorf("summary lacks the cause:\n%s", r.Summary())
	}

	// n1 was hit only before p3 asked for the lock: that cannot have erased p3's key.
	partial := (&hist{}).
		nemesis("kill", "restart", history.EffectFault, []string{"n1"}, 1, 2).
		acquire(3, "k", 5, 10, history.OK, "a", 1000).
		nemesis("kill", "restart", history.EffectFault, []string{"n2", "n3"}, 20, 25).
		acquire(7, "k", 40, 50, history.OK, "b", 1000).
		release(3, "k", "a", 100, 110).
		release(7, "k", "b", 150, 160)
	r = mustCheck(t, partial.events())
	if got := r.Violations[0].Cause; !strings.Contains(got, "no fault hit n1 in between: the lock let p7 in while p3 held it") {
		t.Errorf("cause: %s", got)
	}

	// n2 was stopped before p3 asked and woken before p7 was granted (etcd#15247: a woken leader
	// revokes leases): the pause was in effect in between, and the cause names it.
	woken := (&hist{}).
		nemesis("stop", "pause", history.EffectFault, []string{"n2"}, 1, 2).
		acquire(3, "k", 5, 10, history.OK, "a", 1000).
		nemesis("cont", "pause", history.EffectHeal, []string{"n2"}, 20, 21).
		acquire(7, "k", 40, 50, history.OK, "b", 1000).
		release(3, "k", "a", 100, 110).
		release(7, "k", "b", 150, 160)
	r = mustCheck(t, woken.events())
	if got := r.Violations[0].Cause; !strings.Contains(got, "granted both leases; pause n2 in effect until cont at 0.020s, but no fault hit n1 n3") {
		t.Errorf("cause: %s", got)
	}
}

// queuedHandOffs builds n holds of one key by ten processes whose acquires queue, as blocking
// acquires do: each process asks again as soon as its release returns, and is granted the lock
// exactly when the previous holder's release is invoked. No instant is free of an acquire in
// flight, so the key's history is one segment.
func queuedHandOffs(n int) []history.Event {
	evs := make([]history.Event, 0, 4*n)
	at := func(i int) int64 { return int64(i) * 10 * ms }
	for i := range n {
		p, v := i%10, fmt.Sprint(i)
		evs = append(evs,
			history.Event{Time: max(at(i-9)+ms/2, 0), Type: history.Invoke, Process: p, F: history.FAcquire, Key: "k"},
			history.Event{Time: at(i), Type: history.OK, Process: p, F: history.FAcquire, Key: "k", Value: v, Deadline: at(i) + int64(time.Second)},
			history.Event{Time: at(i + 1), Type: history.Invoke, Process: p, F: history.FRelease, Key: "k", Value: v},
			history.Event{Time: at(i+1) + ms/2, Type: history.OK, Process: p, F: history.FRelease, Key: "k", Value: v})
	}
	sortByTime(evs)
	return evs
}

// Queued hand-offs just past maxSegmentOps porcupine operations in one segment (two per hand-off):
// too long for porcupine, decided exactly by the sweep, quickly.
func TestQueuedHandOffsAreDecidedByTheSweep(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	const n = maxSegmentOps/2 + 500
	evs := queuedHandOffs(n)
	r := mustCheck(t, evs)
	if r.Valid != Valid || r.ViolationCount != 0 || r.Segments != 1 || r.DecidedBy != "sweep (1 segment too long for porcupine)" {
		t.Fatalf("want valid decided by the sweep in 1 segment, got %s by %q in %d segments\n%s", r.Valid, r.DecidedBy, r.Segments, r.Summary())
	}
	if !strings.Contains(r.Summary(), "decided by: sweep (1 segment too long for porcupine)") || !containsSubstring(r.Notes, "decided them alone") {
		t.Errorf("the summary must say which analysis decided:\n%s", r.Summary())
	}
	t.Logf("%d events checked in %s", len(evs), r.CheckDuration)
	// One acquire that completes a millisecond before the previous release: found.
	for i := range evs {
		if e := &evs[i]; e.F == history.FAcquire && e.Type == history.OK && e.Value == fmt.Sprint(n*3/4) {
			e.Time -= ms
		}
	}
	sortByTime(evs)
	if r := mustCheck(t, evs); r.Valid != Invalid || r.ViolationCount != 1 {
		t.Fatalf("one early grant: want invalid with 1 violation, got %s with %d", r.Valid, r.ViolationCount)
	}
}

// One nemesis operation on several nodes is one clause of the cause, with its heal: "restart kill
// n1 n2 n3 at ..., start at ...", never a clause per node.
func TestCauseGroupsAFaultsEvents(t *testing.T) {
	h := (&hist{}).
		acquire(3, "k", 0, 10, history.OK, "a", 5000).
		nemesis("kill", "restart", history.EffectFault, []string{"n1", "n2", "n3"}, 3123, 3124).
		nemesis("start", "restart", history.EffectHeal, []string{"n1", "n2", "n3"}, 3124, 3130).
		acquire(7, "k", 3200, 3210, history.OK, "b", 6000).
		release(3, "k", "a", 3300, 3310).
		release(7, "k", "b", 3400, 3410)
	r := mustCheck(t, h.events())
	want := "n1 n2 n3 granted p3's lease and then p7's: they lost p3's key to restart kill n1 n2 n3 at 3.123s, start at 3.124s (after p3's grant)"
	if got := r.Violations[0].Cause; got != want {
		t.Errorf("cause\n%s\nwant\n%s", got, want)
	}
}
