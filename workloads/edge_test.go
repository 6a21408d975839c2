package workloads

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The edge distribution reaches the deadline: about 60% of holds in the first half of the
// validity, 30% in its last fifth, 10% past it, none beyond 1.2 validities.
func TestEdgeHoldReachesTheDeadline(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	v := time.Second
	var low, near, past int
	const n = 20000
	for range n {
		d := edgeHold(rng, v)
		switch {
		case d < 0 || d >= 1200*time.Millisecond:
			t.Fatalf("hold %v outside [0, 1.2v)", d)
		case d <= v/2:
			low++
		case d >= 800*time.Millisecond && d < v:
			near++
		case d >= v:
			past++
		default:
			t.Fatalf("hold %v in (v/2, 0.8v), which the distribution never draws", d)
		}
	}
	for _, c := range []struct {
		name      string
		got, want int
	}{{"below v/2", low, 60}, {"in [0.8v, v)", near, 30}, {"past v", past, 10}} {
		if pct := 100 * c.got / n; pct < c.want-2 || pct > c.want+2 {
			t.Errorf("%s: %d%% of holds, want about %d%%", c.name, pct, c.want)
		}
	}
}

func TestHoldMaxDrawsUniformly(t *testing.T) {
	m := Mutex{HoldMax: 100 * time.Millisecond}
	if m.HoldName() != HoldUniform {
		t.Fatalf("hold %q with a hold max, want %q", m.HoldName(), HoldUniform)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		if d := m.drawHold(rng, time.Hour); d > m.HoldMax {
			t.Fatalf("hold %v past the hold max %v", d, m.HoldMax)
		}
	}
	if (Mutex{}).HoldName() != HoldEdge {
		t.Fatal("the default distribution is not edge")
	}
}

// A floor keeps every hold within [HoldMin, HoldMax] and spreads them across it; with no floor, a
// seed draws the holds it always drew.
func TestHoldMinRaisesTheFloor(t *testing.T) {
	m := Mutex{HoldMin: 60 * time.Millisecond, HoldMax: 100 * time.Millisecond}
	rng := rand.New(rand.NewPCG(1, 2))
	var below, above int
	for range 10_000 {
		d := m.drawHold(rng, time.Hour)
		if d < m.HoldMin || d > m.HoldMax {
			t.Fatalf("hold %v outside [%v, %v]", d, m.HoldMin, m.HoldMax)
		}
		if d < 70*time.Millisecond {
			below++
		}
		if d > 90*time.Millisecond {
			above++
		}
	}
	if below < 2000 || above < 2000 {
		t.Errorf("%d holds in the lowest quarter and %d in the highest of 10000: not uniform", below, above)
	}
	floorless, old := Mutex{HoldMax: 100 * time.Millisecond}, rand.New(rand.NewPCG(3, 4))
	same := rand.New(rand.NewPCG(3, 4))
	for range 100 {
		if got, want := floorless.drawHold(old, time.Hour), randDuration(same, floorless.HoldMax); got != want {
			t.Fatalf("no floor drew %v, the draw before hold-min %v", got, want)
		}
	}
}

// Groups take turns: after group 0 wins a key, only group 1 may ask for it until group 1 wins it
// or the claim lapses.
func TestTurnsLetTheNextGroupWin(t *testing.T) {
	tr := newTurns(2, 50*time.Millisecond)
	if !tr.mayTry("k", 0) || !tr.mayTry("k", 1) {
		t.Fatal("a key nobody won is closed to a group")
	}
	tr.won("k", 0)
	if tr.mayTry("k", 0) || !tr.mayTry("k", 1) {
		t.Fatal("after group 0 won, the turn is not group 1's")
	}
	if !tr.mayTry("other", 0) {
		t.Fatal("a turn on one key closed another key")
	}
	time.Sleep(60 * time.Millisecond)
	if !tr.mayTry("k", 0) {
		t.Fatal("group 1's claim did not lapse")
	}
	var none *turns
	if !none.mayTry("k", 3) {
		t.Fatal("without turns a group was refused")
	}
}
