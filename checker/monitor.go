package checker

import (
	"sync"

	"github.com/lockpick-dev/lockpick/history"
)

// Monitor counts overlapping holds while a run is in progress, for a live progress line. Fed the
// events of a history in order, it counts exactly the pairs Check counts; it is safe for concurrent
// use and costs O(holds in effect on the key) per event.
type Monitor struct {
	mu     sync.Mutex
	now    int64
	count  int
	key    map[int]string     // process -> key of its in-flight acquire
	open   map[int][]*hold    // process -> holds it has not released
	active map[string][]*hold // key -> holds that may still overlap a later hold
	// recent are the pairs counted at time now. Until time moves on, a release invoked at now can
	// still shrink a hold to end exactly at now, turning such a pair into a legal hand-off.
	recent []pair2
}

type pair2 struct{ a, b *hold }

// NewMonitor returns a Monitor that has seen no events.
func NewMonitor() *Monitor {
	return &Monitor{
		key:    make(map[int]string),
		open:   make(map[int][]*hold),
		active: make(map[string][]*hold),
	}
}

// Observe feeds the monitor the next event of the history; events must come in history order.
//
// At an acquire ok on key k at time t, every other hold on k still in effect after t (not released,
// deadline after t) overlaps the new one. A hold's end is taken to be its deadline until its release
// is seen; that can only overstate the end, and by time order the only pairs it can overstate are
// those whose later hold started at the current instant, which a release at that instant corrects.
func (m *Monitor) Observe(e history.Event) {
	if e.Process < 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.Time > m.now {
		m.now = e.Time
		m.recent = m.recent[:0]
	}
	switch {
	case e.Depth > 1:
		// A reentrant lock's inner level: the owner's hold goes on, as the checker counts it.
		delete(m.key, e.Process)
	case e.F == history.FRenewed || e.F == history.FLost:
		m.leaseNews(e)
	case e.F == history.FAcquire && e.Type == history.Invoke:
		m.key[e.Process] = e.Key
	case e.F == history.FAcquire && e.Type == history.OK:
		key := e.Key
		if key == "" {
			key = m.key[e.Process]
		}
		delete(m.key, e.Process)
		dl := effectiveDeadline(e.Deadline)
		h := &hold{key: key, HoldInfo: HoldInfo{Process: e.Process, Value: e.Value, Start: e.Time, Deadline: dl}}
		h.End, _ = holdEnd(h.Start, dl, Never)
		op := m.open[e.Process]
		op = dropExpired(op, func(j int) *hold { return op[j] }, h.Start)
		clear(op[len(op):cap(op)])
		m.open[e.Process] = append(op, h)
		if expiredOnArrival(h.Start, dl) {
			return // no hold: a release may still name it, but it overlaps nothing
		}
		act := m.active[key]
		kept := act[:0]
		for _, a := range act {
			if a.End > h.Start { // an ended hold overlaps neither this hold nor any later one
				kept = append(kept, a)
			}
		}
		clear(act[len(kept):])
		for _, a := range kept {
			if overlaps(a.Start, a.End, h.Start, h.End) {
				m.count++
				m.recent = append(m.recent, pair2{a, h})
			}
		}
		m.active[key] = append(kept, h)
	case e.F == history.FAcquire:
		delete(m.key, e.Process)
	case e.F == history.FRelease && e.Type == history.Invoke:
		hs := m.open[e.Process]
		j := findLease(len(hs), func(j int) *hold { return hs[j] }, e.Key, e.Value)
		if j < 0 {
			return
		}
		h := hs[j]
		m.open[e.Process] = append(hs[:j], hs[j+1:]...)
		h.End, h.EndedBy = holdEnd(h.Start, h.Deadline, e.Time)
		m.undoRecent(h)
	}
}

// leaseNews applies, as the checker does, a renewal or a loss the lock reported by itself to the
// process's open hold of that lease: a renewal moves its deadline later; a loss ends it there (a
// hold with no deadline lasts until its release or this news). Without it, the monitor would count
// as an overlap a grant to another client after the holder was told it had lost the lock, which the
// checker does not, and a run told to stop at its first violation would stop on nothing.
func (m *Monitor) leaseNews(e history.Event) {
	hs := m.open[e.Process]
	j := findLease(len(hs), func(j int) *hold { return hs[j] }, e.Key, e.Value)
	if j < 0 {
		return
	}
	h := hs[j]
	if e.Time > h.End {
		return // the hold had ended: news about it revives nothing
	}
	if e.F == history.FRenewed {
		if e.Deadline > h.Deadline {
			h.Deadline, h.End = e.Deadline, e.Deadline
		}
		return
	}
	h.Deadline = e.Time
	h.End, h.EndedBy = max(e.Time, h.Start), "lost"
	m.undoRecent(h)
}

// undoRecent uncounts the pairs counted at the current instant that h, just shortened, no longer
// makes.
func (m *Monitor) undoRecent(h *hold) {
	kept := m.recent[:0]
	for _, pr := range m.recent {
		if (pr.a == h || pr.b == h) && !overlaps(pr.a.Start, pr.a.End, pr.b.Start, pr.b.End) {
			m.count--
			continue
		}
		kept = append(kept, pr)
	}
	m.recent = kept
}

// Violations returns how many overlapping pairs of holds the events observed so far contain.
func (m *Monitor) Violations() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count
}
