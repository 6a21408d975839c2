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
