// Package gcbatch tunes the garbage collector for one pass over a history (`lockpick check`): a
// pass allocates gigabytes of short-lived strings and events while its live heap stays small, so
// the runtime's default (collect when the heap doubles) spends a tenth or more of the pass
// collecting. The Go compiler tunes its own collector the same way (cmd/compile's
// AdjustStartingHeap).
package gcbatch

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Tune lets the heap grow to 1+percent/100 times the live heap while the live heap stays under
// small, with a soft memory limit of limit bytes, and returns to the runtime's defaults (GOGC 100,
// no limit) once the live heap passes small: a history whose live state grows (one that does not
// fold) then costs what it did, rather than collecting against the limit without end. An explicit
// GOGC or GOMEMLIMIT in the environment is the user's choice and is left alone. stop ends the
// watch and restores the settings Tune found.
func Tune(percent int, small, limit uint64) (stop func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	oldPercent := debug.SetGCPercent(percent)
	oldLimit := debug.SetMemoryLimit(int64(limit))
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		watch(done, small, oldPercent, oldLimit)
	}()
	return func() {
		close(done)
		<-finished
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}
}

// watch reads the live heap every 50 ms until done, and restores the settings Tune found
// (foundPercent, foundLimit) once it passes small.
func watch(done <-chan struct{}, small uint64, foundPercent int, foundLimit int64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > small {
			debug.SetGCPercent(foundPercent)
			debug.SetMemoryLimit(foundLimit)
			return
		}
	}
}
