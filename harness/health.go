package harness

import (
	"fmt"
	"sync"
	"time"
)

// Overload: a run whose acquires mostly end with an unknown outcome measured the harness, not the
// lock. health counts acquire completions per second of the run, leaving out the seconds in which a
// fault was in effect (a fault explains its timeouts), and says when the share of indeterminate
// outcomes over the last few seconds climbs past a threshold.
const (
	// healthWindow is how many seconds the share is taken over.
	healthWindow = 5
	// healthShare is the share of indeterminate acquires that makes a window unhealthy.
	healthShare = 0.10
	// healthFloor is the fewest acquires a window needs before its share means anything.
	healthFloor = 20
)

type healthBucket struct{ total, info int }

// health is safe for concurrent use.
type health struct {
	mu      sync.Mutex
	buckets []healthBucket // by second of the run
}

// acquire counts an acquire completion at run time t (ns); faulted completions are not counted.
func (h *health) acquire(t int64, info, faulted bool) {
	if faulted || t < 0 {
		return
	}
	sec := int(t / int64(time.Second))
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.buckets) <= sec {
		h.buckets = append(h.buckets, healthBucket{})
	}
	h.buckets[sec].total++
	if info {
		h.buckets[sec].info++
	}
}

// window sums the buckets of the healthWindow seconds ending with second end (exclusive).
func (h *health) window(end int) healthBucket {
	var w healthBucket
	for s := max(0, end-healthWindow); s < end && s < len(h.buckets); s++ {
		w.total += h.buckets[s].total
		w.info += h.buckets[s].info
	}
	return w
}

func (w healthBucket) unhealthy() bool {
	return w.total >= healthFloor && float64(w.info) > healthShare*float64(w.total)
}

func (w healthBucket) share() float64 { return float64(w.info) / float64(max(w.total, 1)) }

// now is the share of indeterminate acquires over the last complete seconds before run time t, and
// whether it is past the threshold.
func (h *health) now(t time.Duration) (float64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.window(int(t / time.Second))
	return w.share(), w.unhealthy()
}

// warning is the run-level verdict on overload: empty when no window was unhealthy, else one
// sentence with when, how bad, and the flag to raise.
func (h *health) warning(nodeTimeout time.Duration) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	// The span named runs from the first to the last second that is itself past the threshold
	// inside an unhealthy window: the window finds the trouble, the seconds say when it was.
	first, last, peakAt := -1, -1, 0
	var peak float64
	for end := 1; end <= len(h.buckets); end++ {
		w := h.window(end)
		if !w.unhealthy() {
			continue
		}
		if s := w.share(); s > peak {
			peak, peakAt = s, end
		}
		for sec := max(0, end-healthWindow); sec < end; sec++ {
			b := h.buckets[sec]
			if b.total == 0 || float64(b.info) <= healthShare*float64(b.total) {
				continue
			}
			if first < 0 || sec < first {
				first = sec
			}
			last = max(last, sec+1)
		}
	}
	if first < 0 {
		return ""
	}
	return fmt.Sprintf("the share of acquires with an unknown outcome (timed out) rose above %.0f%% outside faults from %ds to %ds of the run (peak %.0f%% over %ds-%ds): the machine was too loaded for --node-timeout %v, and the run measured the harness more than the lock; raise --node-timeout (or lower --clients)",
		healthShare*100, first, last, peak*100, max(0, peakAt-healthWindow), peakAt, nodeTimeout)
}
