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
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
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

// Past exactLatencies the percentiles come from a sketch: each within its 1% of the exact
// nearest-rank one, the count and the maximum exact.
func TestLatenciesPastTheExactLimitWithinOnePercent(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	rng := rand.New(rand.NewSource(2))
	var l latencies
	n := exactLatencies + 50000
	plain := make([]int64, 0, n)
	for range n {
		v := 1e5 + rng.Int63n(2e7) // 0.1 to 20 ms
		if rng.Intn(1000) == 0 {
			v = 5e9 + rng.Int63n(1e9) // a few past 32 bits
		}
		l.add(v)
		plain = append(plain, v)
	}
	if l.sketch == nil || l.short != nil || l.long != nil {
		t.Fatalf("%d latencies kept exactly, want them in the sketch", n)
	}
	slices.Sort(plain)
	got := latency(&l)
	if got.Count != n || got.Max != float64(plain[n-1])/1e6 {
		t.Fatalf("count %d max %v, want %d and %v exactly", got.Count, got.Max, n, float64(plain[n-1])/1e6)
	}
	for _, c := range []struct {
		q   float64
		got float64
	}{{0.5, got.P50}, {0.9, got.P90}, {0.99, got.P99}} {
		want := float64(plain[int(math.Ceil(c.q*float64(n)))-1]) / 1e6
		if math.Abs(c.got-want) > 0.01*want {
			t.Errorf("p%v: %v, want within 1%% of %v", c.q*100, c.got, want)
		}
	}
}
