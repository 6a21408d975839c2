package checker

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/lockpick-dev/lockpick/history"
)

// valueIndex finds shared values (see sharedValues) one hold at a time, in the order of the holds,
// for a check that folds its holds (fold.go): it keeps each key and value's first hold, by a
// 128-bit hash of the two, rather than the holds. Two different leases whose hashes agree would
// read as one; at 2^-128 a pair, a run of a billion holds meets that with odds of about 10^-21.
type valueIndex struct {
	seeds  [2]maphash.Seed
	first  map[[2]uint64]valueFirst
	groups map[[2]uint64]*valueGroup
}

// valueFirst is a key and value's first hold.
type valueFirst struct {
	invoke, start int64
	process       int32
}

// valueGroup is a key and value granted to more than one process: its first hold (a), the first
// later one of another process (b), and every process granted it, in the order of their holds.
type valueGroup struct {
	key, value string
	a          valueFirst
	bProcess   int
	bStart     int64
	procs      []int
}

func newValueIndex() *valueIndex {
	return &valueIndex{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		first: map[[2]uint64]valueFirst{}, groups: map[[2]uint64]*valueGroup{}}
}

// add takes the next hold.
func (x *valueIndex) add(h *hold) {
	if h.Value == "" {
		return
	}
	var fp [2]uint64
	for i, seed := range x.seeds {
		var mh maphash.Hash
		mh.SetSeed(seed)
		mh.WriteString(h.key)
		mh.WriteByte(0)
		mh.WriteString(h.Value)
		fp[i] = mh.Sum64()
	}
	f, seen := x.first[fp]
	if !seen {
		x.first[fp] = valueFirst{invoke: h.Invoke, start: h.Start, process: int32(h.Process)}
		return
	}
	g := x.groups[fp]
	switch {
	case g != nil:
		if !slices.Contains(g.procs, h.Process) {
			g.procs = append(g.procs, h.Process)
		}
	case int(f.process) != h.Process:
		x.groups[fp] = &valueGroup{key: h.key, value: h.Value, a: f, bProcess: h.Process, bStart: h.Start,
			procs: []int{int(f.process), h.Process}}
	}
}

// shared is what sharedValues gives for every hold the index took.
func (x *valueIndex) shared() shared {
	out := shared{by: map[[2]string][]int{}}
	gs := make([]*valueGroup, 0, len(x.groups))
	for _, g := range x.groups {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b *valueGroup) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.value, b.value)) })
	for _, g := range gs {
		out.by[[2]string{g.key, g.value}] = slices.Clone(g.procs)
		a := int(g.a.process)
		out.found = append(out.found, Culprit{Kind: CulpritSharedValue, Key: g.key, Process: a, F: history.FAcquire, Value: g.value,
			Invoke: g.a.invoke, Completed: g.a.start, Other: g.bProcess, OtherAt: g.bStart,
			Description: fmt.Sprintf("key %s: p%d and p%d were both granted value %s (at %s and %s): the lock cannot tell their leases apart; a late release or extend by one acts on the other's",
				g.key, a, g.bProcess, g.value, FormatTime(g.a.start), FormatTime(g.bStart))})
	}
	return out
}
