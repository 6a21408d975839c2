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

// valueIndex finds shared values (see sharedValues) for a check that folds its holds (fold.go): it
// takes the holds a batch at a time, in the order of the holds, and keeps of each key and value
// only its first hold, in 24 bytes under an 80-bit FNV-1a hash of the two, rather than the holds. A
// ceiling run of 10 minutes grants about 3 million holds, nearly all with a value of their own.
// Two different leases whose hashes agree would read as one: a run of three million holds meets
// such a pair with odds of about 4 in 10^12.
//
// The entries are kept in runs sorted by hash, one per batch (small runs are merged), and a batch
// is joined with each run in one pass over both: a Go map of the same entries took 70 bytes each.
type valueIndex struct {
	runs [][]valueEntry
	// slow and procs hold what does not fit an entry: the invokes of first holds asked for more
	// than 4.29 s before their grant, and processes past 65,534.
	slow   map[valueKey]int64
	procs  map[valueKey]int
	groups map[valueKey]*valueGroup
}

// valueEntry is a key and value's first hold: its grant, how long its acquire took (slowAcquire:
// see valueIndex.slow) and its process (bigProcess: see valueIndex.procs), under the hash's 80 bits.
type valueEntry struct {
	hash    uint64
	start   int64
	took    uint32
	hash2   uint16
	process uint16
}

type valueKey struct {
	hash  uint64
	hash2 uint16
}

const (
	slowAcquire = math.MaxUint32
	bigProcess  = math.MaxUint16
	// mergedRun bounds the runs that are merged with the one before.
	mergedRun = 1 << 16
)

func (e *valueEntry) key() valueKey { return valueKey{e.hash, e.hash2} }

func compareEntries(a, b *valueEntry) int {
	return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.hash2, b.hash2))
}

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
	return &valueIndex{slow: map[valueKey]int64{}, procs: map[valueKey]int{}, groups: map[valueKey]*valueGroup{}}
}

// entryOf is h's entry, with what does not fit in it put aside.
func (x *valueIndex) entryOf(h *hold) valueEntry {
	f := fnv.New128a()
	f.Write([]byte(h.key))
	f.Write([]byte{0})
	f.Write([]byte(h.Value))
	var sum [16]byte
	f.Sum(sum[:0])
	e := valueEntry{hash: binary.BigEndian.Uint64(sum[:8]), hash2: binary.BigEndian.Uint16(sum[8:10]), start: h.Start,
		took: slowAcquire, process: bigProcess}
	if took := h.Start - h.Invoke; took >= 0 && took < slowAcquire {
		e.took = uint32(took)
	}
	if h.Process >= 0 && h.Process < bigProcess {
		e.process = uint16(h.Process)
	}
	return e
}

// keep records what e could not hold of h, once e is the first hold of its key and value.
func (x *valueIndex) keep(e *valueEntry, h *hold) {
	if e.took == slowAcquire {
		x.slow[e.key()] = h.Invoke
	}
	if e.process == bigProcess {
		x.procs[e.key()] = h.Process
	}
}

func (x *valueIndex) processOf(e *valueEntry) int {
	if e.process == bigProcess {
		return x.procs[e.key()]
	}
	return int(e.process)
}

func (x *valueIndex) invokeOf(e *valueEntry) int64 {
	if e.took == slowAcquire {
		return x.slow[e.key()]
	}
	return e.start - int64(e.took)
}

// addAll takes the next holds, in their order.
func (x *valueIndex) addAll(holds []hold) {
	type batched struct {
		e  valueEntry
		id int32
	}
	var batch []batched
	for i := range holds {
		if holds[i].Value != "" {
			batch = append(batch, batched{x.entryOf(&holds[i]), int32(i)})
		}
	}
	slices.SortFunc(batch, func(a, b batched) int { return cmp.Or(compareEntries(&a.e, &b.e), cmp.Compare(a.id, b.id)) })
	// earlier[i] is the entry an earlier batch has for batch[i]'s key and value, if any.
	earlier := make([]*valueEntry, len(batch))
	for r := range x.runs {
		run := x.runs[r]
		if 16*len(batch) < len(run) {
			// A small batch (a test's fold after every grant): a search in the run for each.
			for i := range batch {
				if j, ok := slices.BinarySearchFunc(run, &batch[i].e, func(a valueEntry, b *valueEntry) int { return compareEntries(&a, b) }); ok {
					earlier[i] = &run[j]
				}
			}
			continue
		}
		j := 0
		for i := range batch {
			for j < len(run) && compareEntries(&run[j], &batch[i].e) < 0 {
				j++
			}
			if j < len(run) && compareEntries(&run[j], &batch[i].e) == 0 {
				earlier[i] = &run[j]
			}
		}
	}
	var fresh []valueEntry
	for i := 0; i < len(batch); {
		n := i + 1
		for n < len(batch) && compareEntries(&batch[n].e, &batch[i].e) == 0 {
			n++
		}
		first, rest := earlier[i], batch[i:n]
		if first == nil {
			fresh = append(fresh, batch[i].e)
			x.keep(&batch[i].e, &holds[batch[i].id])
			first, rest = &fresh[len(fresh)-1], batch[i+1:n]
		}
		for _, b := range rest {
			x.again(first, &holds[b.id])
		}
		i = n
	}
	if len(fresh) > 0 {
		x.runs = append(x.runs, fresh)
	}
	for n := len(x.runs); n >= 2 && len(x.runs[n-2])+len(x.runs[n-1]) <= mergedRun; n = len(x.runs) {
		merged := make([]valueEntry, 0, len(x.runs[n-2])+len(x.runs[n-1]))
		merged = append(append(merged, x.runs[n-2]...), x.runs[n-1]...)
		slices.SortFunc(merged, func(a, b valueEntry) int { return compareEntries(&a, &b) })
		x.runs = append(x.runs[:n-2], merged)
	}
}

// again takes h, a later hold of the key and value whose first hold is first.
func (x *valueIndex) again(first *valueEntry, h *hold) {
	k := first.key()
	if g := x.groups[k]; g != nil {
		if !slices.Contains(g.procs, h.Process) {
			g.procs = append(g.procs, h.Process)
		}
		return
	}
	if a := x.processOf(first); a != h.Process {
		x.groups[k] = &valueGroup{key: h.key, value: h.Value, aProcess: a, aInvoke: x.invokeOf(first), aStart: first.start,
			bProcess: h.Process, bStart: h.Start, procs: []int{a, h.Process}}
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
