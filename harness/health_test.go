package harness

import (
	"strings"
	"testing"
	"time"
)

func feed(h *health, sec, total, info int, faulted bool) {
	for i := range total {
		h.acquire(int64(sec)*int64(time.Second)+int64(i), i < info, faulted)
	}
}

// A run whose acquires time out outside faults is told, with when, how bad, and the flag to raise.
func TestHealthWarnsOfTimeoutsOutsideFaults(t *testing.T) {
	var h health
	for s := range 30 {
		info := 0
		if s >= 9 && s < 25 {
			info = 50 // every acquire from second 9 to 25 timed out
		}
		feed(&h, s, 50, info, false)
	}
	w := h.warning(100 * time.Millisecond)
	for _, want := range []string{"from 9s to 25s", "peak 100%", "--node-timeout 100ms", "raise --node-timeout"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q lacks %q", w, want)
		}
	}
	if share, bad := h.now(20 * time.Second); !bad || share != 1 {
		t.Errorf("at 20s: share %v, unhealthy %v; want 1, true", share, bad)
	}
	if _, bad := h.now(31 * time.Second); bad {
		t.Error("at 31s, after five healthy seconds: still unhealthy")
	}
}

// Timeouts while a fault is in effect are the fault's doing; a few timeouts, or too few acquires to
// judge, are no overload either.
func TestHealthIgnoresFaultsAndNoise(t *testing.T) {
	var h health
	for s := range 30 {
		feed(&h, s, 50, 50, true)  // all timed out, under a fault
		feed(&h, s, 100, 4, false) // 4% outside faults
	}
	feed(&h, 40, 10, 10, false) // all timed out, but only ten acquires in the window
	if w := h.warning(time.Second); w != "" {
		t.Errorf("unexpected warning: %s", w)
	}
}

// The progress line names the overload and the flag while it lasts.
func TestProgressLineShowsOverload(t *testing.T) {
	s := newStatus()
	feed(&s.health, 3, 40, 20, false)
	if l := s.line(4*time.Second, time.Minute, 100*time.Millisecond); !strings.Contains(l, "OVERLOAD: 50% of acquires timed out") || !strings.Contains(l, "raise --node-timeout (now 100ms)") {
		t.Errorf("progress line %q does not warn", l)
	}
	if l := s.line(10*time.Second, time.Minute, 100*time.Millisecond); strings.Contains(l, "OVERLOAD") {
		t.Errorf("progress line %q still warns five quiet seconds later", l)
	}
}
