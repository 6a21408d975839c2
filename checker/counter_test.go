package checker

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/resource"
)

// randomCounterOps simulates rounds in which one to three clients read a counter at about the same
// time and then write the value they read plus one, on a coarse clock: operations overlap, writes go
// unknown (and took effect or not), guards reject, reads go stale or unknown (a fencing read may
// have registered its token) and now and then a read returns a value nobody wrote, so both
// linearizable and broken histories occur. Without readTokens the reads carry no token, as in
// histories recorded before fencing reads registered theirs.
func randomCounterOps(rng *rand.Rand, guard resource.Guard, rounds int, readTokens bool) []resOp {
	var ops []resOp
	var st resource.State
	var t int64
	for range rounds {
		k := 1 + rng.Intn(3)
		reads := make([]int64, k)
		rets := make([]int64, k)
		invs := make([]int64, k)
		tokens, readToks := make([]int64, k), make([]int64, k)
		var writers []int
		for p := range k {
			invs[p] = t + int64(rng.Intn(2))
			rets[p] = invs[p] + int64(rng.Intn(2))
			reads[p] = st.Value
			tokens[p] = int64(1 + rng.Intn(12))
			readToken := tokens[p]
			if !readTokens {
				readToken = 0
			}
			readToks[p] = readToken
			if rng.Float64() < 0.03 {
				reads[p] += int64(rng.Intn(3)) - 1
			}
			registered := true
			if guard.Registers(readToken) && rng.Float64() < 0.1 {
				// A read of unknown outcome: its process writes nothing.
				registered = rng.Intn(2) == 0
				ops = append(ops, resOp{in: counterIn{kind: opReadMaybe, process: p, token: readToken}, inv: invs[p], ret: math.MaxInt64})
			} else {
				writers = append(writers, p)
			}
			if registered && guard.Registers(readToken) {
				st.Seen = max(st.Seen, readToken)
			}
		}
		rng.Shuffle(len(writers), func(a, b int) { writers[a], writers[b] = writers[b], writers[a] })
		for _, p := range writers {
			writeInv := rets[p] + int64(rng.Intn(2))
			writeRet := writeInv + int64(rng.Intn(3))
			token := tokens[p]
			accepted := guard.Accepts(st, reads[p], token)
			x := rng.Float64()
			if accepted && (x < 0.35 || x >= 0.55 && rng.Intn(2) == 0) {
				st.Value = reads[p] + 1
				if guard == resource.GuardFencing {
					st.Highest = max(st.Highest, token)
				}
			}
			read := resOp{in: counterIn{kind: opRead, process: p, read: reads[p], token: readToks[p]}, inv: invs[p], ret: rets[p]}
			in := counterIn{process: p, read: reads[p], token: token}
			switch {
			case x < 0.35 && accepted:
				in.kind = opInc
				ops = append(ops, resOp{in: in, inv: invs[p], ret: writeRet})
			case x < 0.55:
				in.kind = opWriteFail
				ops = append(ops, read, resOp{in: in, inv: writeInv, ret: writeRet})
			default:
				in.kind = opIncMaybe
				ops = append(ops, read, resOp{in: in, inv: invs[p], ret: math.MaxInt64})
			}
		}
		t += 3 + int64(rng.Intn(3))
	}
	if rng.Intn(2) == 0 {
		ops = append(ops, resOp{in: counterIn{kind: opFinal, process: -1, read: st.Value}, inv: t + 10, ret: t + 11})
	}
	return ops
}

// Cutting the counter history into parts, shortening unknown writes and carrying sets of end states
// must give exactly porcupine's verdict on the whole, uncut history.
func TestCounterPartsAgreeWithTheWholeHistory(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	rng := rand.New(rand.NewSource(8))
	var legal, illegal, multi int
	for i := range 4500 {
		// Fencing half the time, its reads with and without tokens: its highest tokens are where
		// several end states come from.
		guard := []resource.Guard{resource.GuardNone, resource.GuardFencing, resource.GuardCheckSet, resource.GuardFencing}[i%4]
		ops := randomCounterOps(rng, guard, 2+rng.Intn(6), i%4 != 3)
		model := counterModel(guard)
		whole := make([]porcupine.Operation, len(ops))
		for j, op := range ops {
			whole[j] = porcupine.Operation{ClientId: op.in.process, Input: op.in, Call: op.inv, Return: op.ret}
		}
		want := porcupine.CheckOperations(model, whole)
		r := &ResourceResult{}
		var drawn []resSegment
		got := r.checkCounter(model, guard, "k", slices.Clone(ops), func() time.Duration { return 0 }, &drawn)
		if (got == porcupine.Ok) != want || got == porcupine.Unknown || len(r.Errors) > 0 {
			t.Fatalf("history %d (guard %s): parts say %s, the whole history %v, errors %v\n%+v", i, guard, got, want, r.Errors, ops)
		}
		if want {
			legal++
		} else {
			illegal++
		}
		for _, s := range drawn {
			if in := s.ops[0].Input.(counterIn); in.kind == opCarry && len(in.carries) > 1 {
				multi++
				break
			}
		}
	}
	if legal < 300 || illegal < 300 || multi < 30 {
		t.Errorf("weak sample: %d legal, %d illegal, %d with several carried states", legal, illegal, multi)
	}
	t.Logf("%d legal, %d illegal, %d carried several states", legal, illegal, multi)
}

// An unknown write is resolved by the first operation that shows the value past what it read.
func TestResolveUnknownWrites(t *testing.T) {
	ops := []resOp{
		{in: counterIn{kind: opIncMaybe, read: 5}, inv: 10, ret: math.MaxInt64},
		{in: counterIn{kind: opRead, read: 5}, inv: 20, ret: 21}, // not past 5: the write may still land
		{in: counterIn{kind: opRead, read: 6}, inv: 30, ret: 31}, // past 5
		{in: counterIn{kind: opRead, read: 0}, inv: 0, ret: 1},
		{in: counterIn{kind: opIncMaybe, read: 9}, inv: 40, ret: math.MaxInt64}, // nothing past 9
		{in: counterIn{kind: opInc, read: 2}, inv: 2, ret: 3},
		{in: counterIn{kind: opIncMaybe, read: 2}, inv: 5, ret: math.MaxInt64}, // the increment from 2 returned at 3, before it began
	}
	resolveUnknownWrites(ops)
	for i, want := range map[int]int64{0: 31, 4: math.MaxInt64, 6: 5} {
		if ops[i].ret != want {
			t.Errorf("op %d: ret %d, want %d", i, ops[i].ret, want)
		}
	}
}

// Two unknown writes, one of which took effect: the part ends with either token as the highest,
// and the next part is checked from both.
func TestCounterCarriesEveryPossibleEndState(t *testing.T) {
	part1 := []resOp{
		{in: counterIn{kind: opRead, process: 0, read: 0}, inv: 0, ret: 1},
		{in: counterIn{kind: opIncMaybe, process: 0, read: 0, token: 3}, inv: 0, ret: math.MaxInt64},
		{in: counterIn{kind: opRead, process: 1, read: 0}, inv: 0, ret: 1},
		{in: counterIn{kind: opIncMaybe, process: 1, read: 0, token: 7}, inv: 0, ret: math.MaxInt64},
		{in: counterIn{kind: opRead, process: 2, read: 1}, inv: 5, ret: 6}, // one of them landed
	}
	for token, want := range map[int64]porcupine.CheckResult{5: porcupine.Ok, 8: porcupine.Ok, 2: porcupine.Illegal} {
		// An accepted fencing write with token 5 is legal only if token 3 was the one that landed.
		ops := append(slices.Clone(part1), resOp{in: counterIn{kind: opInc, process: 2, read: 1, token: token}, inv: 10, ret: 11})
		r := &ResourceResult{}
		var drawn []resSegment
		got := r.checkCounter(counterModel(resource.GuardFencing), resource.GuardFencing, "k", ops, func() time.Duration { return 0 }, &drawn)
		if got != want || len(drawn) != 2 {
			t.Errorf("token %d: got %s in %d parts, want %s in 2 %v %v", token, got, len(drawn), want, r.Errors, r.Notes)
		}
	}
}

// genCounter simulates a counter run under a lock that works: one holder at a time reads, writes
// and releases; now and then the write's outcome is unknown, and it took effect or not. It returns
// the events and the final value.
func genCounter(seed int64, cycles int, infoEvery int) []history.Event {
	rng := rand.New(rand.NewSource(seed))
	h := &counterHist{guard: "none"}
	var v int64
	for i := range cycles {
		t0 := int64(i) * 10 * ms
		p := i % 10
		outcome := history.OK
		if rng.Intn(infoEvery) == 0 {
			outcome = history.Info
		}
		h.cycle(p, t0, 8*ms, 0, v, t0+3*ms, outcome)
		if outcome == history.OK || rng.Intn(2) == 0 {
			v++
		}
	}
	h.final(int64(cycles)*10*ms+ms, v)
	sortByTime(h.evs)
	return h.evs
}

// A long counter history with unknown writes scattered through it gets a definite verdict: before,
// everything after the first unknown write was one segment, unknown past maxSegmentOps (32,768)
// operations. Each cycle is a read and a write: just past maxSegmentOps of them is long enough to
// prove it, and every size above only costs time (each check here is three checks and a JSON round
// trip under -race).
func TestLongCounterHistoryWithUnknownWritesIsDefinite(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	cycles := maxSegmentOps/2 + 500
	evs := genCounter(5, cycles, 200)
	r := mustCheckCounter(t, evs)
	if r.Resource.Valid != Valid || r.Resource.Writes.Info < 60 || r.Resource.Segments < cycles/2 {
		t.Fatalf("want data valid in many segments with many unknown writes, got %s, %d unknown writes, %d segments\n%s",
			r.Resource.Valid, r.Resource.Writes.Info, r.Resource.Segments, r.Summary())
	}
	t.Logf("%d events, %d unknown writes, %d segments, checked in %s", len(evs), r.Resource.Writes.Info, r.Resource.Segments, r.CheckDuration)
	// A lost update deep inside is still found: a write that read a stale value.
	for i := range evs {
		e := &evs[i]
		if e.F == history.FRead && e.Type == history.OK && e.Time > int64(cycles)*10*ms*3/4 {
			n, _ := strconv.ParseInt(e.Value, 10, 64)
			e.Value = fmt.Sprint(n - 1)
			break
		}
	}
	if r := mustCheckCounter(t, evs); r.Resource.Valid != Invalid {
		t.Fatalf("stale read deep in the history: want data invalid, got %s\n%s", r.Resource.Valid, r.Summary())
	}
}
