// Package proctable maps a history's process numbers to per-process state, for look-ups made on
// every event.
package proctable

// Table maps a process number to its state, for the look-ups made on every event (a process's
// invoke in flight, its open and recent holds, its latest event). A run numbers its
// client processes densely from 0, so those are a slice index, several times cheaper than a map's
// hash and probe; any other number (the nemesis, harness and system, a hand-made history's odd
// ones) goes to a map. The zero value is an empty table.
type Table[V any] struct {
	dense  []cell[V]
	sparse map[int]V
	n      int // processes set
}

type cell[V any] struct {
	v   V
	set bool
}

// denseLimit bounds the slice: a history naming process 10^9 costs a map entry, not gigabytes.
const denseLimit = 1 << 16

// Get is p's state, and whether p has one.
func (t *Table[V]) Get(p int) (V, bool) {
	if p >= 0 && p < len(t.dense) {
		c := &t.dense[p]
		return c.v, c.set
	}
	v, ok := t.sparse[p]
	return v, ok
}

// At is p's state, the zero V when p has none (a map's t[p]).
func (t *Table[V]) At(p int) V {
	v, _ := t.Get(p)
	return v
}

// Put sets p's state.
func (t *Table[V]) Put(p int, v V) {
	if p >= 0 && p < denseLimit {
		if p >= len(t.dense) {
			t.dense = append(t.dense, make([]cell[V], p+1-len(t.dense))...)
		}
		c := &t.dense[p]
		if !c.set {
			t.n++
		}
		c.v, c.set = v, true
		return
	}
	if t.sparse == nil {
		t.sparse = map[int]V{}
	}
	if _, ok := t.sparse[p]; !ok {
		t.n++
	}
	t.sparse[p] = v
}

// Delete removes p's state.
func (t *Table[V]) Delete(p int) {
	if p >= 0 && p < len(t.dense) {
		c := &t.dense[p]
		if c.set {
			t.n--
		}
		*c = cell[V]{}
		return
	}
	if _, ok := t.sparse[p]; ok {
		t.n--
		delete(t.sparse, p)
	}
}

// Len is the number of processes with a state.
func (t *Table[V]) Len() int { return t.n }

// Each calls f for every process with a state: the dense ones in increasing order, then the others
// in no particular order (as a map's range).
func (t *Table[V]) Each(f func(p int, v V)) {
	for p := range t.dense {
		if c := &t.dense[p]; c.set {
			f(p, c.v)
		}
	}
	for p, v := range t.sparse {
		f(p, v)
	}
}
