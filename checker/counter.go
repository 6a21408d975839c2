package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockpick-dev/lockpick/resource"
)

// How the counter model is cut so that porcupine can check a long run exactly.
//
// In the model the value only ever goes up, by exactly one per increment that takes effect: an
// accepted increment, or a write of unknown outcome that took effect, must find the value its
// process read and leaves that value plus one. Two facts follow.
//
// A write of unknown outcome that read v can take effect only while the value is v. Once an
// operation has shown the value above v (a read or the final value above v, or an accepted
// increment that read v or more), it never will. So the write's interval, open-ended in the
// history, can end at the return of the first such operation (and no earlier than its own start):
// in any linearization where it comes later it is a no-op, and a no-op can move back to that point.
// The history is linearizable with the shortened interval iff it is with the open one
// (resolveUnknownWrites). This is what lets the history be cut again after an unknown write.
//
// A quiet point, where no operation is in flight, cuts the history into parts whose every operation
// precedes every operation of the next part. The whole is linearizable iff there is a chain of
// states s0, s1, ... with each part linearizable from its start state to its end state. So each
// part is checked from the set of states the previous part can end in, and the set it can itself
// end in is found exactly: the end value is the start value plus the accepted increments plus
// some of the unknown writes, the highest token (fencing) the highest among the start and the
// tokens that took effect, and the highest token read likewise among the reads' tokens; each such
// candidate is kept iff porcupine can linearize the part ending with an operation legal only in
// that state (endStates). With no unknown write there is one candidate and no extra check. An
// illegal part makes the whole illegal.

// maxEndCandidates bounds the candidate end states checked for one part. Beyond it the set is
// carried unchecked, which can only hide a violation, so the result is unknown at best.
const maxEndCandidates = 64

// A read of unknown outcome that carried a token (fencing) can register it only while no higher
// token has been registered or accepted: once a read or an accepted increment with a token at least
// as high has returned, registering it changes nothing a later write is judged by (a write must
// then pass that token anyway). Its interval ends there (resolveUnknownReads); under any other
// guard it registers nothing and is a no-op at its invoke.

// resolveUnknownReads shortens the interval of each read of unknown outcome (see above).
func resolveUnknownReads(ops []resOp, guard resource.Guard) {
	for i := range ops {
		if ops[i].in.kind != opReadMaybe {
			continue
		}
		if !guard.Registers(ops[i].in.token) {
			ops[i].ret = ops[i].inv
			continue
		}
		for _, op := range ops {
			if (op.in.kind == opRead || op.in.kind == opInc) && op.in.token >= ops[i].in.token && op.ret < ops[i].ret {
				ops[i].ret = max(ops[i].inv, op.ret)
			}
		}
	}
}

// resolveUnknownWrites shortens the interval of each write of unknown outcome to end where an
// operation has shown the value past the one it read (see above).
func resolveUnknownWrites(ops []resOp) {
	type pin struct{ floor, ret int64 } // after its return, the value is at least floor
	var pins []pin
	var maybe []int
	for i, op := range ops {
		switch op.in.kind {
		case opRead, opFinal:
			pins = append(pins, pin{op.in.read, op.ret})
		case opInc:
			pins = append(pins, pin{op.in.read + 1, op.ret})
		case opIncMaybe:
			maybe = append(maybe, i)
		}
	}
	if len(maybe) == 0 {
		return
	}
	// Highest floor first, and the writes by value read, highest first: each write sees the
	// earliest return among the pins above its value.
	slices.SortFunc(pins, func(a, b pin) int { return cmp.Compare(b.floor, a.floor) })
	slices.SortFunc(maybe, func(a, b int) int { return cmp.Compare(ops[b].in.read, ops[a].in.read) })
	earliest, k := int64(math.MaxInt64), 0
	for _, i := range maybe {
		for k < len(pins) && pins[k].floor > ops[i].in.read {
			earliest = min(earliest, pins[k].ret)
			k++
		}
		if earliest != math.MaxInt64 {
			ops[i].ret = max(ops[i].inv, earliest)
		}
	}
}

// counterParts orders a key's operations and cuts them at quiet points.
func counterParts(ops []resOp) [][]resOp {
	slices.SortStableFunc(ops, func(a, b resOp) int {
		if a.inv != b.inv {
			return cmp.Compare(a.inv, b.inv)
		}
		return cmp.Compare(a.ret, b.ret)
	})
	var parts [][]resOp
	begin := 0
	var reach int64 = math.MinInt64
	for i, op := range ops {
		if i > begin && op.inv > reach {
			parts = append(parts, ops[begin:i:i])
			begin = i
		}
		reach = max(reach, op.ret)
	}
	if begin < len(ops) {
		parts = append(parts, ops[begin:])
	}
	return parts
}

// checkCounter checks one key's counter operations part by part, carrying from each part to the
// next the set of states it can end in. It appends every part checked to drawn.
func (r *ResourceResult) checkCounter(model porcupine.Model, guard resource.Guard, key string, ops []resOp, timeLeft func() time.Duration, drawn *[]resSegment) porcupine.CheckResult {
	resolveUnknownWrites(ops)
	resolveUnknownReads(ops, guard)
	parts := counterParts(ops)
	carry := []counterState{{}}
	result := porcupine.Ok
	for k, part := range parts {
		seg := make([]porcupine.Operation, 0, len(part)+2)
		if k > 0 {
			at := part[0].inv - 1
			seg = append(seg, porcupine.Operation{ClientId: -1, Input: counterIn{kind: opCarry, carries: carry}, Call: at, Return: at})
		}
		for _, op := range part {
			seg = append(seg, porcupine.Operation{ClientId: op.in.process, Input: op.in, Call: op.inv, Return: op.ret})
		}
		r.Segments++
		res := r.linearize(model, seg, key, timeLeft)
		*drawn = append(*drawn, resSegment{ops: seg, result: res})
		switch res {
		case porcupine.Illegal:
			r.noteIllegal(key, part)
			return porcupine.Illegal
		case porcupine.Unknown:
			result = porcupine.Unknown
		}
		if k == len(parts)-1 {
			break
		}
		next, exact := r.endStates(model, guard, part, seg, carry, res, key, timeLeft)
		if !exact {
			result = porcupine.Unknown
		}
		if next == nil {
			// Too many states to carry: what follows cannot be checked exactly.
			r.Notes = append(r.Notes, fmt.Sprintf("a segment of %s could end in more than %d states; the rest of its history was not checked", key, maxEndCandidates))
			return porcupine.Unknown
		}
		carry = next
	}
	return result
}

// noteIllegal keeps the first illegal part's span: from its first invoke to its last return (a write
// of unknown outcome, which may land any time, does not stretch it).
func (r *ResourceResult) noteIllegal(key string, part []resOp) {
	if r.Illegal != nil || len(part) == 0 {
		return
	}
	s := &IllegalStretch{Key: key, From: part[0].inv, Until: part[0].inv}
	for _, op := range part {
		s.From = min(s.From, op.inv)
		if op.ret != math.MaxInt64 {
			s.Until = max(s.Until, op.ret)
		}
	}
	r.Illegal = s
}

// linearize checks one part with porcupine, or leaves it unknown when it is too long for porcupine.
func (r *ResourceResult) linearize(model porcupine.Model, seg []porcupine.Operation, key string, timeLeft func() time.Duration) porcupine.CheckResult {
	if len(seg) > maxSegmentOps {
		r.Notes = append(r.Notes, fmt.Sprintf("a segment of %s had %d operations, more than porcupine is given", key, len(seg)))
		return porcupine.Unknown
	}
	return porcupine.CheckOperationsTimeout(model, seg, timeLeft())
}

// endStates is the set of states a part can end in, given the set it can start in and porcupine's
// result on it; exact is false when the set is a superset (the part or a candidate undecided).
func (r *ResourceResult) endStates(model porcupine.Model, guard resource.Guard, part []resOp, seg []porcupine.Operation, carry []counterState, res porcupine.CheckResult, key string, timeLeft func() time.Duration) (next []counterState, exact bool) {
	cands := endCandidates(part, carry, guard)
	switch {
	case cands == nil:
		return nil, false
	case res == porcupine.Ok && len(cands) == 1:
		return cands, true // it linearizes, and every linearization ends there
	case res != porcupine.Ok:
		return cands, false
	}
	var end int64
	for _, op := range part {
		end = max(end, op.ret)
	}
	end++
	exact = true
	for _, c := range cands {
		pinned := append(slices.Clip(seg), porcupine.Operation{ClientId: -1, Input: counterIn{kind: opPin, carry: c}, Call: end, Return: end})
		switch r.linearize(model, pinned, key, timeLeft) {
		case porcupine.Ok:
			next = append(next, c)
		case porcupine.Unknown:
			next, exact = append(next, c), false
		}
	}
	if len(next) == 0 {
		// The part linearizes, so it ends somewhere among the candidates: this is a bug in lockpick.
		r.Errors = append(r.Errors, fmt.Sprintf("checker error: a segment of %s linearizes but ends in none of its %d candidate states", key, len(cands)))
		return cands, false
	}
	return next, exact
}

// endCandidates are the states a part may end in, from each state it may start in: the value plus
// the accepted increments plus any number of the unknown writes, and (fencing) the highest token
// among the start, the accepted writes and any of the unknown ones above them, and the highest
// token read among the start, the reads and any of the unknown reads above them. It returns nil
// when there are more than maxEndCandidates.
func endCandidates(part []resOp, carry []counterState, guard resource.Guard) []counterState {
	var incs, incHighest, readHighest int64
	var maybe, maybeRead []int64
	for _, op := range part {
		switch op.in.kind {
		case opInc:
			incs++
			incHighest = max(incHighest, op.in.token)
			readHighest = max(readHighest, op.in.token)
		case opIncMaybe:
			maybe = append(maybe, op.in.token)
		case opRead:
			readHighest = max(readHighest, op.in.token)
		case opReadMaybe:
			maybeRead = append(maybeRead, op.in.token)
		}
	}
	var out []counterState
	for _, s := range carry {
		highs, seens := []int64{s.highest}, []int64{s.seen}
		if guard == resource.GuardFencing {
			highs = tokenCandidates(max(s.highest, incHighest), maybe)
			seens = tokenCandidates(max(s.seen, readHighest), maybeRead)
		}
		for j := range int64(len(maybe)) + 1 {
			for _, h := range highs {
				for _, r := range seens {
					if c := (counterState{value: s.value + incs + j, highest: h, seen: r}); !slices.Contains(out, c) {
						if len(out) == maxEndCandidates {
							return nil
						}
						out = append(out, c)
					}
				}
			}
		}
	}
	return out
}

// tokenCandidates is base and every token of maybe above it: the highest token once any of maybe
// took effect.
func tokenCandidates(base int64, maybe []int64) []int64 {
	out := []int64{base}
	for _, t := range maybe {
		if t > base && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}
