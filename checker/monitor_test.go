package checker

import (
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// The live monitor applies the lease news a lock reports by itself as the checker does: a loss
// ends the hold there (a later grant to another client is no overlap), a renewal moves the
// deadline (a grant before the new deadline is one). It counts what the checker counts.
func TestMonitorAppliesLeaseNews(t *testing.T) {
	for name, c := range map[string]struct {
		h    *hist
		want int
	}{
		"lost, then another grant": {(&hist{}).
			acquire(0, "k", 0, 10, history.OK, "a", 0). // no deadline: held until release or loss
			add(history.Event{Time: 50, Type: history.Info, Process: 0, F: history.FLost, Key: "k", Value: "a"}).
			acquire(1, "k", 60, 70, history.OK, "b", 2070).
			release(1, "k", "b", 100, 110).
			release(0, "k", "a", 200, 210), 0},
		"another grant, then lost": {(&hist{}).
			acquire(0, "k", 0, 10, history.OK, "a", 0).
			acquire(1, "k", 30, 40, history.OK, "b", 2040).
			add(history.Event{Time: 50, Type: history.Info, Process: 0, F: history.FLost, Key: "k", Value: "a"}).
			release(1, "k", "b", 100, 110).
			release(0, "k", "a", 200, 210), 1},
		"renewed past another grant": {(&hist{}).
			acquire(0, "k", 0, 10, history.OK, "a", 100).
			add(history.Event{Time: 50, Type: history.Info, Process: 0, F: history.FRenewed, Key: "k", Value: "a", Deadline: 300}).
			acquire(1, "k", 150, 160, history.OK, "b", 2160).
			release(1, "k", "b", 180, 190).
			release(0, "k", "a", 200, 210), 1},
		"renewed after its hold ended": {(&hist{}).
			acquire(0, "k", 0, 10, history.OK, "a", 100).
			release(0, "k", "a", 40, 45).
			add(history.Event{Time: 50, Type: history.Info, Process: 0, F: history.FRenewed, Key: "k", Value: "a", Deadline: 300}).
			acquire(1, "k", 150, 160, history.OK, "b", 2160).
			release(1, "k", "b", 180, 190), 0},
	} {
		evs := c.h.events()
		m := NewMonitor()
		for _, e := range evs {
			m.Observe(&e)
		}
		r := mustCheck(t, evs)
		if r.ViolationCount != c.want || m.Violations() != c.want {
			t.Errorf("%s: checker %d, monitor %d overlaps, want %d", name, r.ViolationCount, m.Violations(), c.want)
		}
	}
}

// The live monitor counts early lease losses as the checker does: a release or extend refused as
// lost before the deadline, and a loss the lock reported before it; not a refusal after it.
func TestMonitorCountsEarlyLosses(t *testing.T) {
	refused := func(p int, f, key, value string, inv, done int64) history.Event {
		return history.Event{Time: done, Type: history.Fail, Process: p, F: f, Key: key, Value: value, Reason: history.ReasonLost}
	}
	for name, c := range map[string]struct {
		h    *hist
		want int
	}{
		"release refused before the deadline": {(&hist{}).
			acquire(0, "k", 0, 10, history.OK, "a", 1000).
			add(history.Event{Time: 100, Type: history.Invoke, Process: 0, F: history.FRelease, Key: "k", Value: "a"}).
			add(refused(0, history.FRelease, "k", "a", 100, 110)), 1},
		"release refused after the deadline": {(&hist{}).
			acquire(0, "k", 0, 10, history.OK, "a", 100).
			add(history.Event{Time: 150, Type: history.Invoke, Process: 0, F: history.FRelease, Key: "k", Value: "a"}).
			add(refused(0, history.FRelease, "k", "a", 150, 160)), 0},
		"extend refused before the deadline": {(&hist{}).
			acquire(0, "k", 0, 10, history.OK, "a", 1000).
			add(history.Event{Time: 100, Type: history.Invoke, Process: 0, F: history.FExtend, Key: "k", Value: "a"}).
			add(refused(0, history.FExtend, "k", "a", 100, 110)).
			release(0, "k", "a", 200, 210), 1},
		"lost reported before the deadline": {(&hist{}).
			acquire(0, "k", 0, 10, history.OK, "a", 1000).
			add(history.Event{Time: 50, Type: history.Info, Process: 0, F: history.FLost, Key: "k", Value: "a"}), 1},
	} {
		evs := c.h.events()
		m := NewMonitor()
		for _, e := range evs {
			m.Observe(&e)
		}
		r := mustCheck(t, evs)
		if r.EarlyLossCount != c.want || m.EarlyLosses() != c.want {
			t.Errorf("%s: checker %d, monitor %d early losses, want %d", name, r.EarlyLossCount, m.EarlyLosses(), c.want)
		}
	}
}
