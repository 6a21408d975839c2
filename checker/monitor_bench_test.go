package checker

import (
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// BenchmarkMonitorObserve is the live monitor's cost per event at the ceiling (it sees every event
// under the recorder's lock): nine refusals to a grant, the grant's work and its release, one key.
// One b.N is one event.
func BenchmarkMonitorObserve(b *testing.B) {
	const key, value = "lockpick:0", "QSWIFD3ORJTVX73LWW7Y6LTTNU"
	var mix []history.Event
	for p := range 9 {
		mix = append(mix,
			history.Event{Type: history.Invoke, Process: p, F: history.FAcquire, Key: key},
			history.Event{Type: history.Fail, Process: p, F: history.FAcquire, Key: key, Reason: history.ReasonHeld, Error: "lock not acquired: held by another client"})
	}
	mix = append(mix,
		history.Event{Type: history.Invoke, Process: 9, F: history.FAcquire, Key: key},
		history.Event{Type: history.OK, Process: 9, F: history.FAcquire, Key: key, Value: value, Deadline: 2e9, Validity: 2e9, Nodes: []string{"n1"}},
		history.Event{Type: history.Invoke, Process: 9, F: history.FWork, Key: key, Value: value},
		history.Event{Type: history.OK, Process: 9, F: history.FWork, Key: key, Value: value},
		history.Event{Type: history.Invoke, Process: 9, F: history.FRelease, Key: key, Value: value},
		history.Event{Type: history.OK, Process: 9, F: history.FRelease, Key: key, Value: value})
	m := NewMonitor()
	var t int64
	i := 0
	for b.Loop() {
		e := &mix[i]
		t += 1000
		e.Time = t
		if e.Type == history.OK && e.F == history.FAcquire {
			e.Deadline = t + 2e9
		}
		m.Observe(e)
		if i++; i == len(mix) {
			i = 0
		}
	}
}
