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
			m.Observe(e)
		}
		r := mustCheck(t, evs)
		if r.ViolationCount != c.want || m.Violations() != c.want {
			t.Errorf("%s: checker %d, monitor %d overlaps, want %d", name, r.ViolationCount, m.Violations(), c.want)
		}
	}
}
