package history

import (
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkRecord is the recorder's cost per event at the ceiling: the event mix of a single lock's
// run at the ceiling (nine refusals to a grant; each grant works and releases), written to a file,
// tapped by a reader that takes the events as the run's check does, and seen by an observer. One
// b.N is one event. It is the part of every operation the harness adds to the lock's own requests.
func BenchmarkRecord(b *testing.B) {
	for _, tapped := range []bool{false, true} {
		name := "file"
		if tapped {
			name = "file+tap"
		}
		b.Run(name, func(b *testing.B) {
			var seen int
			rec, err := Create(filepath.Join(b.TempDir(), FileName), time.Now(), func(e *Event) {
				if e.Type != Invoke {
					seen++
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			drained := make(chan int)
			if tapped {
				tap, err := rec.NewTap()
				if err != nil {
					b.Fatal(err)
				}
				go func() { drained <- drain(tap, rec) }()
			}
			mix := ceilingMix()
			i := 0
			for b.Loop() {
				rec.Record(mix[i])
				if i++; i == len(mix) {
					i = 0
				}
			}
			if err := rec.Close(); err != nil {
				b.Fatal(err)
			}
			if tapped {
				if n := <-drained; n != b.N {
					b.Fatalf("the tap's reader read %d events of %d", n, b.N)
				}
			}
		})
	}
}

// drain reads tap to the end of rec's history, as a run's check does, and returns the events read.
func drain(tap *Tap, rec *Recorder) int {
	whole := func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.closed
	}
	r := NewTapReader(tap, whole, func() error { time.Sleep(25 * time.Millisecond); return nil },
		func(int64) (io.Reader, error) { return nil, errors.New("the tap fell behind") })
	n := 0
	for r.Scan() {
		n++
	}
	return n
}

// ceilingMix is one grant's events and the nine refusals before it, as a run at the ceiling has them.
func ceilingMix() []Event {
	const key, value = "lockpick:0", "QSWIFD3ORJTVX73LWW7Y6LTTNU"
	var mix []Event
	for p := range 9 {
		mix = append(mix,
			Event{Type: Invoke, Process: p, F: FAcquire, Key: key},
			Event{Type: Fail, Process: p, F: FAcquire, Key: key, Reason: ReasonHeld, Error: "lock not acquired: held by another client"})
	}
	nodes := []string{"n1"}
	return append(mix,
		Event{Type: Invoke, Process: 9, F: FAcquire, Key: key},
		Event{Type: OK, Process: 9, F: FAcquire, Key: key, Value: value, Deadline: 1978480346, Validity: 1977874043, Nodes: nodes},
		Event{Type: Invoke, Process: 9, F: FWork, Key: key, Value: value},
		Event{Type: OK, Process: 9, F: FWork, Key: key, Value: value},
		Event{Type: Invoke, Process: 9, F: FRelease, Key: key, Value: value},
		Event{Type: OK, Process: 9, F: FRelease, Key: key, Value: value})
}
