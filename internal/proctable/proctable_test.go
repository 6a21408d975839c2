package proctable

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// TestTableActsAsAMap runs the same random puts, deletes and look-ups on a Table and on a
// map, over dense, negative and huge process numbers, and fails at the first answer that differs.
func TestTableActsAsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	procs := []int{-3, -2, -1, 0, 1, 2, 7, 100, denseLimit - 1, denseLimit, 1 << 30, -1 << 40}
	var tab Table[int]
	want := map[int]int{}
	for step := range 20000 {
		p := procs[rng.IntN(len(procs))]
		if rng.IntN(4) == 0 {
			p = rng.IntN(3000)
		}
		switch rng.IntN(3) {
		case 0:
			tab.Put(p, step)
			want[p] = step
		case 1:
			tab.Delete(p)
			delete(want, p)
		}
		got, ok := tab.Get(p)
		w, wok := want[p]
		if got != w || ok != wok || tab.At(p) != w {
			t.Fatalf("step %d: process %d is (%d, %v), want (%d, %v)", step, p, got, ok, w, wok)
		}
		if tab.Len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, tab.Len(), len(want))
		}
	}
	seen := map[int]int{}
	last := -1
	tab.Each(func(p, v int) {
		if _, dup := seen[p]; dup {
			t.Fatalf("each gave process %d twice", p)
		}
		if p >= 0 && p < denseLimit {
			if p <= last {
				t.Fatalf("each gave dense process %d after %d", p, last)
			}
			last = p
		}
		seen[p] = v
	})
	if !maps.Equal(seen, want) {
		t.Fatalf("each gave %v, want %v", seen, want)
	}
}
