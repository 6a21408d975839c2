package checker

import (
	"math/rand"
	"testing"
)

// whollyInFaults counts what the plain double loop over holds and windows counts.
func TestWhollyInFaultsMatchesEveryPair(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := range 200 {
		wins := make([]FaultWindow, rng.Intn(8))
		for i := range wins {
			a := rng.Int63n(1000)
			wins[i] = FaultWindow{Applied: a, Lifted: a + rng.Int63n(300) - 50}
		}
		holds := make([]hold, rng.Intn(50))
		for i := range holds {
			inv := rng.Int63n(1200)
			holds[i] = hold{Invoke: inv, Start: inv + rng.Int63n(100)}
		}
		want := 0
		for _, h := range holds {
			for _, w := range wins {
				if h.Invoke >= w.Applied && h.Start <= w.Lifted {
					want++
					break
				}
			}
		}
		if got := whollyInFaults(holds, wins); got != want {
			t.Fatalf("round %d: %d acquires wholly in faults, the double loop counts %d", round, got, want)
		}
	}
}
