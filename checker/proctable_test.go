package checker

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// TestProcTableActsAsAMap runs the same random puts, deletes and look-ups on a procTable and on a
// map, over dense, negative and huge process numbers, and fails at the first answer that differs.
func TestProcTableActsAsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	procs := []int{-3, -2, -1, 0, 1, 2, 7, 100, denseProcs - 1, denseProcs, 1 << 30, -1 << 40}
	var tab procTable[int]
	want := map[int]int{}
	for step := range 20000 {
		p := procs[rng.IntN(len(procs))]
		if rng.IntN(4) == 0 {
			p = rng.IntN(3000)
		}
		switch rng.IntN(3) {
		case 0:
			tab.put(p, step)
			want[p] = step
		case 1:
			tab.del(p)
			delete(want, p)
		}
		got, ok := tab.get(p)
		w, wok := want[p]
		if got != w || ok != wok || tab.at(p) != w {
			t.Fatalf("step %d: process %d is (%d, %v), want (%d, %v)", step, p, got, ok, w, wok)
		}
		if tab.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, tab.len(), len(want))
		}
	}
	seen := map[int]int{}
	last := -1
	tab.each(func(p, v int) {
		if _, dup := seen[p]; dup {
			t.Fatalf("each gave process %d twice", p)
		}
		if p >= 0 && p < denseProcs {
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
