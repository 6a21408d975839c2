package checker

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"github.com/lockpick-dev/lockpick/history"
)

// valueIndex finds shared values (see sharedValues) one hold at a time, in the order of the holds,
// for a check that folds its holds (fold.go): it keeps each key and value's first hold, 32 bytes
// under a 128-bit FNV-1a hash of the two, rather than the holds. Two different leases whose hashes
// agree would read as one; a run of a billion holds meets such a pair with odds of about 10^-21.
type valueIndex struct {
	first map[[2]uint64]valueFirst
	// slow holds the invokes of first holds asked for more than 4.29 s before their grant.
	slow   map[[2]uint64]int64
	groups map[[2]uint64]*valueGroup
}

// valueFirst is a key and value's first hold: its grant, how long its acquire took (slowAcquire:
// see valueIndex.slow) and its process.
type valueFirst struct {
	start   int64
	took    uint32
	process int32
}

const slowAcquire = math.MaxUint32

// valueGroup is a key and value granted to more than one process: its first hold (a: process,
// invoke, grant), the first later one of another process (b), and every process granted it, in the
// order of their holds.
type valueGroup struct {
	key, value      string
	aProcess        int
	aInvoke, aStart int64
	bProcess        int
	bStart          int64
	procs           []int
}

func newValueIndex() *valueIndex {
	return &valueIndex{first: map[[2]uint64]valueFirst{}, slow: map[[2]uint64]int64{}, groups: map[[2]uint64]*valueGroup{}}
}

// fingerprint is the 128-bit FNV-1a hash of a key and a value.
func fingerprint(key, value string) [2]uint64 {
	h := fnv.New128a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(value))
	var sum [16]byte
	h.Sum(sum[:0])
	return [2]uint64{binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:])}
}

// add takes the next hold.
func (x *valueIndex) add(h *hold) {
	if h.Value == "" {
		return
	}
	fp := fingerprint(h.key, h.Value)
	f, seen := x.first[fp]
	if !seen {
		f = valueFirst{start: h.Start, took: slowAcquire, process: int32(h.Process)}
		if took := h.Start - h.Invoke; took >= 0 && took < slowAcquire {
			f.took = uint32(took)
		} else {
			x.slow[fp] = h.Invoke
		}
		x.first[fp] = f
		return
	}
	g := x.groups[fp]
	switch {
	case g != nil:
		if !slices.Contains(g.procs, h.Process) {
			g.procs = append(g.procs, h.Process)
		}
	case int(f.process) != h.Process:
		inv := f.start - int64(f.took)
		if f.took == slowAcquire {
			inv = x.slow[fp]
		}
		x.groups[fp] = &valueGroup{key: h.key, value: h.Value, aProcess: int(f.process), aInvoke: inv, aStart: f.start,
			bProcess: h.Process, bStart: h.Start, procs: []int{int(f.process), h.Process}}
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
		out.found = append(out.found, Culprit{Kind: CulpritSharedValue, Key: g.key, Process: g.aProcess, F: history.FAcquire, Value: g.value,
			Invoke: g.aInvoke, Completed: g.aStart, Other: g.bProcess, OtherAt: g.bStart,
			Description: fmt.Sprintf("key %s: p%d and p%d were both granted value %s (at %s and %s): the lock cannot tell their leases apart; a late release or extend by one acts on the other's",
				g.key, g.aProcess, g.bProcess, g.value, FormatTime(g.aStart), FormatTime(g.bStart))})
	}
	return out
}
