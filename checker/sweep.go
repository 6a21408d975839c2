package checker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
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
	a, b := &p.holds[pr.a], &p.holds[pr.b]
	v := Violation{Key: a.key, A: a.HoldInfo, B: b.HoldInfo}
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

// failoverCause explains two leases granted by different primaries: the faults that hit the first
// lease's node, and the promotion of the second's ("n1 granted p4's lease; failover kill hit n1; n3
// was promoted to primary (announced at 14.670s) and granted p247's at 14.623s: ...").
// Empty when no node of the second lease was promoted in between.
func failoverCause(v *Violation, first, second *HoldInfo, hitBy map[string][]string) string {
	for _, e := range v.Roles {
		for _, n := range second.Nodes {
			if e.Roles[n] != "primary" {
				continue
			}
			var hits []string
			for _, f := range first.Nodes {
				for _, h := range hitBy[f] {
					hits = append(hits, h+" hit "+f)
				}
			}
			what := "no fault hit " + strings.Join(first.Nodes, " ")
			if len(hits) > 0 {
				what = strings.Join(hits, ", ")
			}
			return fmt.Sprintf("%s granted p%d's lease; %s; %s was promoted to primary (announced at %s) and granted p%d's at %s: the promoted node never had p%d's key",
				strings.Join(first.Nodes, " "), first.Process, what, n, FormatTime(e.Time), second.Process, FormatTime(second.Start), first.Process)
		}
	}
	return ""
}

// cause names the nodes that granted both leases and the faults that hit them between the earlier
// lease's acquire and the later one's grant: a node that granted both must have lost the earlier
// key in between, and the fault that made it lose the key is what let the second client in. When
// some such node was hit by no fault, the lock itself let two clients in, and cause says so.
func cause(v *Violation) string {
	// Each lease's keys were written somewhere between its acquire's invoke and its grant, so the
	// writes of two overlapping acquires can come in either order: the one that asked first is taken
	// as the first writer, and a fault anywhere from the first ask to the last grant can explain it.
	first, second := &v.A, &v.B
	if second.Invoke < first.Invoke || second.Invoke == first.Invoke && second.Start < first.Start {
		first, second = second, first
	}
	lastGrant := max(first.Start, second.Start)
	if len(first.Nodes) == 0 || len(second.Nodes) == 0 {
		return ""
	}
	hitBy := map[string][]string{}
	for i, e := range v.Nemesis {
		// A heal after the first acquire began ends a fault that was in effect while it ran (a
		// member paused before it and woken after), whenever that fault began.
		if e.Type == history.Invoke && e.Effect == history.EffectHeal && e.F != history.FResetForward && e.Time >= first.Invoke && e.Time <= lastGrant {
			for _, n := range e.Nodes {
				what := fmt.Sprintf("%s (in effect until %s %s at %s)", e.Fault, e.F, n, FormatTime(e.Time))
				if !slices.Contains(hitBy[n], what) {
					hitBy[n] = append(hitBy[n], what)
				}
			}
			continue
		}
		hits := e.Effect == history.EffectFault || e.F == history.FResetForward
		if e.Type != history.Invoke || !hits || e.Time > lastGrant {
			continue
		}
		// A fault takes effect somewhere between its invoke and its completion: one that completed
		// after the first acquire began, or had not completed by the end of the overlap (a strobe),
		// may still have removed the key that acquire set.
		if done := completionOf(v.Nemesis, i); e.Time < first.Invoke && done != nil && done.Time < first.Invoke {
			continue
		}
		what := e.Fault + " " + e.F
		if len(e.Offsets) > 0 {
			// A clock fault says how far it moved the nodes that granted both leases:
			// "clock bump-forward n3 by +4s (measured +4.001s)".
			shared := e
			shared.Nodes = nil
			for _, n := range e.Nodes {
				if slices.Contains(first.Nodes, n) && slices.Contains(second.Nodes, n) {
					shared.Nodes = append(shared.Nodes, n)
				}
			}
			if len(shared.Nodes) > 0 {
				what += " " + describeOffsets(shared, completionOf(v.Nemesis, i))
			}
		}
		for _, n := range e.Nodes {
			if !slices.Contains(hitBy[n], what) {
				hitBy[n] = append(hitBy[n], what)
			}
		}
	}
	var both, unexplained []string
	faults := map[string]bool{}
	for _, n := range second.Nodes {
		if !slices.Contains(first.Nodes, n) {
			continue
		}
		both = append(both, n)
		if len(hitBy[n]) == 0 {
			unexplained = append(unexplained, n)
		}
		for _, f := range hitBy[n] {
			faults[f] = true
		}
	}
	if len(both) == 0 {
		if c := failoverCause(v, first, second, hitBy); c != "" {
			return c
		}
		return fmt.Sprintf("p%d and p%d were granted by disjoint nodes (%s and %s)", first.Process, second.Process, strings.Join(first.Nodes, " "), strings.Join(second.Nodes, " "))
	}
	if len(unexplained) > 0 && len(faults) > 0 {
		// Where the nodes agree on the lock (etcd's members), a fault on some of them is enough;
		// where each keeps it on its own (Redis), the untouched ones should have refused.
		return fmt.Sprintf("%s granted both leases; %s hit %s after p%d asked for the lock, and no fault hit %s in between: the lock let p%d in while p%d held it",
			strings.Join(both, " "), strings.Join(slices.Sorted(maps.Keys(faults)), ", "), strings.Join(slices.DeleteFunc(slices.Clone(both), func(n string) bool { return slices.Contains(unexplained, n) }), " "),
			first.Process, strings.Join(unexplained, " "), second.Process, first.Process)
	}
	if len(unexplained) > 0 {
		return fmt.Sprintf("%s granted both leases and no fault hit %s in between: the lock let p%d in while p%d held it", strings.Join(both, " "), strings.Join(unexplained, " "), second.Process, first.Process)
	}
	them, they := "them", "they"
	if len(both) == 1 {
		them, they = "it", "it"
	}
	return fmt.Sprintf("%s granted p%d's lease and then p%d's: %s hit %s after p%d asked for the lock, so %s lost its key",
		strings.Join(both, " "), first.Process, second.Process, strings.Join(slices.Sorted(maps.Keys(faults)), ", "), them, first.Process, they)
}
