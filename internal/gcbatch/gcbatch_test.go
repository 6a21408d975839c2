package gcbatch

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// gcPercent reads the collector's percent without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// A pass that stays small keeps the raised percent and the limit; one whose live heap passes small
// goes back to the defaults while it runs; stop restores what Tune found.
func TestTuneRaisesThenReturnsToTheDefaults(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	stop := Tune(400, 8<<20, 256<<20)
	if p, l := gcPercent(), debug.SetMemoryLimit(-1); p != 400 || l != 256<<20 {
		t.Fatalf("tuned: GC percent %d, limit %d; want 400 and %d", p, l, 256<<20)
	}
	live := make([]byte, 32<<20) // past small, and kept live below
	for i := range live {
		live[i] = byte(i)
	}
	deadline := time.Now().Add(5 * time.Second)
	for gcPercent() != 100 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if p, l := gcPercent(), debug.SetMemoryLimit(-1); p != 100 || l != math.MaxInt64 {
		t.Errorf("with %d MiB live: GC percent %d, limit %d; want the defaults", len(live)>>20, p, l)
	}
	runtime.KeepAlive(live)
	stop()
	if p, l := gcPercent(), debug.SetMemoryLimit(-1); p != 100 || l != math.MaxInt64 {
		t.Errorf("after stop: GC percent %d, limit %d; want the defaults", p, l)
	}
}

// An explicit GOGC is the user's: Tune changes nothing.
func TestTuneLeavesAnExplicitGOGC(t *testing.T) {
	t.Setenv("GOGC", "100")
	stop := Tune(400, 8<<20, 256<<20)
	defer stop()
	if p := gcPercent(); p != 100 {
		t.Errorf("GOGC=100 set: GC percent %d after Tune", p)
	}
}
