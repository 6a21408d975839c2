package checker

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

// The compact latencies give the nearest-rank percentiles of the plain sorted list, whatever mix of
// short, long and negative values they hold.
func TestLatenciesMatchASortedList(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := range 200 {
		var l latencies
		var plain []int64
		size := 1 + rng.Intn(300)
		if round%20 == 0 {
			size = 20000 + rng.Intn(20000) // long enough to partition many times
		}
		for range size {
			var v int64
			switch rng.Intn(4) {
			case 0:
				v = math.MaxUint32 + rng.Int63n(1e10) - 3 // around the edge of 32 bits, and past it
			case 1:
				v = -rng.Int63n(1e6)
			case 2:
				v = rng.Int63n(50) // many equal values
			default:
				v = rng.Int63n(3e9)
			}
			l.add(v)
			plain = append(plain, v)
		}
		slices.Sort(plain)
		at := func(q float64) float64 {
			i := max(0, min(int(math.Ceil(q*float64(len(plain))))-1, len(plain)-1))
			return float64(plain[i]) / 1e6
		}
		want := Latency{Count: len(plain), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: float64(plain[len(plain)-1]) / 1e6}
		if got := latency(&l); got != want {
			t.Fatalf("round %d: %+v, want %+v", round, got, want)
		}
	}
}
