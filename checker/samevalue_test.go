package checker

import (
	"cmp"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"
)

// sameValueGroups groups the holds a stable sort by key and value groups, in the same order.
func TestSameValueGroupsMatchASortByKeyAndValue(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := range 300 {
		holds := make([]hold, rng.Intn(200))
		for i := range holds {
			holds[i].key = fmt.Sprintf("k%d", rng.Intn(3))
			if v := rng.Intn(60); v > 0 {
				holds[i].Value = fmt.Sprintf("v%d", v)
			}
			holds[i].Process = rng.Intn(5)
		}
		var ids []int32
		for i := range holds {
			if holds[i].Value != "" {
				ids = append(ids, int32(i))
			}
		}
		slices.SortStableFunc(ids, func(a, b int32) int {
			return cmp.Or(cmp.Compare(holds[a].key, holds[b].key), cmp.Compare(holds[a].Value, holds[b].Value))
		})
		var want [][]int32
		for s := 0; s < len(ids); {
			e := s + 1
			for e < len(ids) && holds[ids[e]].key == holds[ids[s]].key && holds[ids[e]].Value == holds[ids[s]].Value {
				e++
			}
			if e-s > 1 {
				want = append(want, ids[s:e])
			}
			s = e
		}
		if got := sameValueGroups(holds); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: groups %v, want %v", round, got, want)
		}
	}
}

// The value index of a folding check (values.go) finds the shared values sharedValues finds, taking
// the holds in batches: the same culprits, in the same order, and the same processes per value,
// whatever an acquire took (past 4.29 s its invoke is kept apart) and whatever the process's number
// (past 65,534 it is kept apart).
func TestValueIndexFindsWhatSharedValuesFinds(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for range 300 {
		holds := make([]hold, rng.Intn(300))
		var at int64
		for i := range holds {
			h := &holds[i]
			h.key = fmt.Sprintf("k%d", rng.Intn(3))
			if v := rng.Intn(80); v > 0 {
				h.Value = fmt.Sprintf("v%d", v)
			}
			h.Process = rng.Intn(6)
			if rng.Intn(8) == 0 {
				h.Process = 70000 + rng.Intn(3)
			}
			at += rng.Int63n(1e9)
			h.Start = at
			h.Invoke = at - rng.Int63n(1e6)
			if rng.Intn(10) == 0 {
				h.Invoke = at - 5e9 - rng.Int63n(1e10) // slower than 32 bits of nanoseconds
			}
		}
		x := newValueIndex()
		for i := 0; i < len(holds); { // in batches of any size, as folds take them
			n := min(len(holds), i+1+rng.Intn(40))
			x.addAll(holds[i:n])
			i = n
		}
		got, want := x.shared(), sharedValues(holds)
		if !reflect.DeepEqual(got.found, want.found) || !reflect.DeepEqual(got.by, want.by) {
			t.Fatalf("value index:\n%+v\nsharedValues:\n%+v", got, want)
		}
	}
}
