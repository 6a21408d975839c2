package checker

// procTable maps a process number to its state, for the look-ups the checker makes on every event
// (a process's invoke in flight, its open and recent holds, its latest event). A run numbers its
// client processes densely from 0, so those are a slice index, several times cheaper than a map's
// hash and probe; any other number (the nemesis, harness and system, a hand-made history's odd
// ones) goes to a map. The zero value is an empty table.
type procTable[V any] struct {
	dense  []procCell[V]
	sparse map[int]V
	n      int // processes set
}

type procCell[V any] struct {
	v   V
	set bool
}

// denseProcs bounds the slice: a history naming process 10^9 costs a map entry, not gigabytes.
const denseProcs = 1 << 16

func (t *procTable[V]) get(p int) (V, bool) {
	if p >= 0 && p < len(t.dense) {
		c := &t.dense[p]
		return c.v, c.set
	}
	v, ok := t.sparse[p]
	return v, ok
}

// at is p's state, the zero V when p has none (a map's t[p]).
func (t *procTable[V]) at(p int) V {
	v, _ := t.get(p)
	return v
}

func (t *procTable[V]) put(p int, v V) {
	if p >= 0 && p < denseProcs {
		if p >= len(t.dense) {
			t.dense = append(t.dense, make([]procCell[V], p+1-len(t.dense))...)
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

func (t *procTable[V]) del(p int) {
	if p >= 0 && p < len(t.dense) {
		c := &t.dense[p]
		if c.set {
			t.n--
		}
		*c = procCell[V]{}
		return
	}
	if _, ok := t.sparse[p]; ok {
		t.n--
		delete(t.sparse, p)
	}
}

// len is the number of processes with a state.
func (t *procTable[V]) len() int { return t.n }

// each calls f for every process with a state: the dense ones in increasing order, then the others
// in no particular order (as a map's range).
func (t *procTable[V]) each(f func(p int, v V)) {
	for p := range t.dense {
		if c := &t.dense[p]; c.set {
			f(p, c.v)
		}
	}
	for p, v := range t.sparse {
		f(p, v)
	}
}

// lastKey remembers the state of the key looked up last: a run has a handful of keys and most
// consecutive events name the same one, found with a string comparison (the decoder shares one
// copy of each key, so mostly a pointer comparison) instead of a map's hash and probe.
type lastKey[V any] struct {
	key string
	v   *V
}

// find is the remembered state if key is the one remembered, nil otherwise.
func (l *lastKey[V]) find(key string) *V {
	if l.v != nil && l.key == key {
		return l.v
	}
	return nil
}

func (l *lastKey[V]) keep(key string, v *V) { l.key, l.v = key, v }
