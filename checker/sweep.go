package checker

import (
	"slices"
	"sort"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// overlaps reports whether two holds [aStart, aEnd] and [bStart, bEnd] of one key break mutual
// exclusion. It is the one overlap predicate of the package: the offline sweep and the Monitor both
// call it, and it is exactly the condition under which porcupine cannot linearize the two holds.
//
// Holds a then b linearize iff a's release (at aEnd) can come before b's acquire returns (at
// bStart), i.e. aEnd <= bStart: porcupine orders calls before returns at equal times, so touching
// at one instant is a legal hand-off. The pair is illegal iff neither order works. Written this way
// (rather than max(starts) < min(ends)) it is also right for a hold of one instant inside another.
func overlaps(aStart, aEnd, bStart, bEnd int64) bool {
	return aStart < bEnd && bStart < aEnd
}

// keyOrder groups hold ids by key, keys sorted, so every step walks keys in the same order. Leases
// that expired on arrival are no holds and are left out.
func keyOrder(holds []hold) (keys []string, byKey map[string][]int32) {
	byKey = make(map[string][]int32)
	for i := range holds {
		if holds[i].dead {
			continue
		}
		k := holds[i].key
		if _, seen := byKey[k]; !seen {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], int32(i))
	}
	sort.Strings(keys)
	return keys, byKey
}

// pair is two overlapping holds, a started no later than b.
type pair struct{ a, b int32 }

// sweep finds every overlapping pair of holds of one key (step 3). It calls visit for each pair in
// order of the later hold's start; sorting by start means a hold only needs comparing with the holds
// still in effect when it starts, so the cost is O(n log n + n·active + pairs).
func sweep(holds []hold, ids []int32, visit func(pair)) {
	order := make([]int32, len(ids))
	copy(order, ids)
	sort.Slice(order, func(i, j int) bool {
		a, b := &holds[order[i]], &holds[order[j]]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		return order[i] < order[j]
	})
	var active []int32
	for _, id := range order {
		h := &holds[id]
		// Holds that ended at or before h started cannot overlap h, nor any later hold.
		kept := active[:0]
		for _, a := range active {
			if holds[a].End > h.Start {
				kept = append(kept, a)
			}
		}
		active = kept
		for _, a := range active {
			ah := &holds[a]
			if overlaps(ah.Start, ah.End, h.Start, h.End) {
				visit(pair{a, id})
			}
		}
		active = append(active, id)
	}
}

// explain turns an overlapping pair into a Violation with the nemesis events around it.
func explain(st *store, p *parsed, pr pair) Violation {
	a, b := p.at(pr.a), p.at(pr.b)
	v := Violation{Key: a.key, A: a.info(), B: b.info()}
	v.OverlapStart = max(a.Start, b.Start)
	v.OverlapEnd = min(a.End, b.End)
	v.Overlap = v.OverlapEnd - v.OverlapStart
	from := min(a.Invoke, b.Invoke)
	i := sort.Search(len(p.nemesis), func(i int) bool { return st.at(p.nemesis[i]).Time >= from })
	// An operation invoked before both acquires but completed after one began was still in progress
	// (a clock is moved, a node killed, only once the operation runs): it belongs with the violation.
	// Each event is read with its pair (nemesisEvent), so a completion that left the fault, effect
	// or nodes to its invoke is still matched and named.
	var before []history.Event
	for j := i - 1; j >= 0 && from-st.at(p.nemesis[j]).Time < int64(time.Minute); j-- {
		e := st.at(p.nemesis[j])
		if e.Type != history.Invoke {
			continue
		}
		if c, done := p.pairOf[p.nemesis[j]]; done && st.at(c).Time >= from {
			before = append(before, p.nemesisEvent(st, p.nemesis[j]))
		}
	}
	slices.Reverse(before)
	v.Nemesis = append(v.Nemesis, before...)
	for ; i < len(p.nemesis) && st.at(p.nemesis[i]).Time <= v.OverlapEnd; i++ {
		v.Nemesis = append(v.Nemesis, p.nemesisEvent(st, p.nemesis[i]))
	}
	// The system announces a promotion once it has polled its sentinels, which can be after the
	// promoted node granted its first lease: the changes up to the end of the overlap count.
	for _, j := range p.roles {
		if e := st.at(j); e.Time >= from && e.Time <= v.OverlapEnd {
			v.Roles = append(v.Roles, *e)
		}
	}
	v.Cause = cause(&v)
	v.Description = describeViolation(&v)
	return v
}
