package checker

import (
	"slices"
	"sync"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/internal/proctable"
)

// Monitor counts overlapping holds while a run is in progress, for a live progress line. Fed the
// events of a history in order, it counts exactly the pairs Check counts; it is safe for concurrent
// use and costs O(holds in effect on the key) per event.
type Monitor struct {
	mu    sync.Mutex
	now   int64
	count int
	early int // early lease losses, as the checker counts them (lostAt)
	// key, open and latest are tables, not maps: they are looked up on nearly every event, under
	// the recorder's lock at the ceiling.
	key    proctable.Table[string]  // process -> key of its in-flight acquire
	ext    map[int]history.Event    // process -> its in-flight extend
	rel    map[int]history.Event    // process -> its in-flight release
	nem    []history.Event          // nemesis invokes in flight, oldest first
	levels levelBook[*hold]         // process -> reentrant levels it entered and has not left
	open   proctable.Table[[]*hold] // process -> holds it has not released
	latest proctable.Table[[]*hold] // process -> its latest holds, released or not, as the parser's recent
	active map[string][]*hold       // key -> holds that may still overlap a later hold
	// recent are the pairs counted at time now. Until time moves on, a release invoked at now can
	// still shrink a hold to end exactly at now, turning such a pair into a legal hand-off.
	recent []pair2
}

type pair2 struct{ a, b *hold }

// NewMonitor returns a Monitor that has seen no events.
func NewMonitor() *Monitor {
	return &Monitor{
		ext:    make(map[int]history.Event),
		rel:    make(map[int]history.Event),
		levels: levelBook[*hold]{},
		active: make(map[string][]*hold),
	}
}

// Observe feeds the monitor the next event of the history; events must come in history order. It
// does not keep e (at the ceiling it sees every event under the recorder's lock: a copy of each was
// a cost of every operation). It applies re-entries, releases by level, extends, the lock's own news and client crashes by the
// checker's own step-1 rules (reentry.go), so its count is the checker's.
//
// At an acquire ok on key k at time t, every other hold on k still in effect after t (not released,
// deadline after t) overlaps the new one. A hold's end is taken to be its deadline until its release
// is seen; that can only overstate the end, and by time order the only pairs it can overstate are
// those whose later hold started at the current instant, which a release at that instant corrects.
func (m *Monitor) Observe(e *history.Event) {
	if e.Process < 0 && e.Process != history.NemesisProcess {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.Time > m.now {
		m.now = e.Time
		m.recent = m.recent[:0]
	}
	switch {
	case e.Process == history.NemesisProcess:
		m.nemesis(e)
	case e.F == history.FRenewed || e.F == history.FLost:
		m.leaseNews(e)
	case e.F == history.FAcquire && e.Type == history.Invoke:
		m.key.Put(e.Process, e.Key)
	case e.F == history.FAcquire && e.Type == history.OK:
		m.acquired(e)
	case e.F == history.FAcquire:
		m.key.Delete(e.Process)
	case e.F == history.FExtend && e.Type == history.Invoke:
		m.ext[e.Process] = *e
	case e.F == history.FExtend:
		m.extended(e)
	case e.F == history.FRelease && e.Type == history.Invoke:
		m.rel[e.Process] = *e
		m.released(e)
	case e.F == history.FRelease:
		if inv, ok := m.rel[e.Process]; ok {
			delete(m.rel, e.Process)
			m.lost(&inv, e)
		}
	}
}

// acquired is an ok acquire: a re-entry that continues its process's hold, or a new hold, counted
// against every hold of the key still in effect.
func (m *Monitor) acquired(e *history.Event) {
	key := e.Key
	if key == "" {
		key = m.key.At(e.Process)
	}
	m.key.Delete(e.Process)
	op := m.open.At(e.Process)
	if e.Depth > 1 {
		if j := continued(len(op), func(j int) *hold { return op[j] }, key, e); j >= 0 {
			reenter(op[j], e)
			m.levels.enter(e.Process, op[j], e.Depth)
			m.undoRecent(op[j])
			return
		}
	}
	h := m.grant(key, e.Process, e.Value, e.Time, e.Deadline)
	if e.Depth > 0 {
		m.levels.enter(e.Process, h, e.Depth)
	}
}

// grant is a new hold of key by process pid from start until deadline (0: none), counted against
// every hold of the key still in effect: an ok acquire, or a late renewal (parser.revive).
func (m *Monitor) grant(key string, pid int, value string, start, deadline int64) *hold {
	dl := effectiveDeadline(deadline)
	h := &hold{key: key, Process: pid, Value: value, Start: start, Deadline: dl}
	h.End, h.EndedBy = holdEnd(h.Start, dl, Never)
	h.dead = expiredOnArrival(h.Start, dl)
	op := m.open.At(pid)
	op = dropExpired(op, func(j int) *hold { return op[j] }, h.Start)
	clear(op[len(op):cap(op)])
	m.open.Put(pid, append(op, h))
	r := append(m.latest.At(pid), h)
	if len(r) > recentHolds {
		r = r[len(r)-recentHolds:]
	}
	m.latest.Put(pid, r)
	if h.dead {
		return h // no hold: a release may still name it, but it overlaps nothing
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
	return h
}

// released is a release invoke: the process leaves the level it names, or its latest matching
// hold, as the checker's parser does (leftLevel).
func (m *Monitor) released(e *history.Event) {
	hs := m.open.At(e.Process)
	j := -1
	if e.Depth > 0 {
		h, last, found := m.levels.leave(e.Process, e.Depth, func(h *hold) bool { return matchLease(h.key, h.Value, e.Key, e.Value) })
		switch {
		case found && !last, !found && e.Depth > 1:
			return
		case found:
			j = slices.Index(hs, h)
			if j < 0 {
				return
			}
		}
	}
	if j < 0 {
		j = findLease(len(hs), func(j int) *hold { return hs[j] }, e.Key, e.Value)
	}
	if j < 0 {
		return
	}
	h := hs[j]
	m.open.Put(e.Process, append(hs[:j], hs[j+1:]...))
	releaseHold(h, e.Time)
	m.undoRecent(h)
}

// extended applies an ok extend to its process's hold by the checker's rule (renewHold).
func (m *Monitor) extended(e *history.Event) {
	inv, ok := m.ext[e.Process]
	delete(m.ext, e.Process)
	if ok {
		m.lost(&inv, e)
	}
	if !ok || e.Type != history.OK {
		return
	}
	hs := m.latest.At(e.Process)
	j := findLease(len(hs), func(j int) *hold { return hs[j] }, inv.Key, inv.Value)
	if j < 0 {
		m.grant(inv.Key, e.Process, inv.Value, e.Time, e.Deadline) // an extend of a lease never granted
		return
	}
	m.renew(hs[j], e)
}

// renew applies the renewal e (an ok extend or a renewed event) to its hold h by renewHold's rule;
// a late one is a grant of its own (parser.revive), to which the levels entered under h move.
func (m *Monitor) renew(h *hold, e *history.Event) {
	if !renewHold(h, e.Time, e.Deadline) {
		return
	}
	n := m.grant(h.key, e.Process, h.Value, e.Time, e.Deadline)
	m.levels.move(e.Process, h, n)
}

// nemesis pairs nemesis events as the checker does; a client crash that took effect ends the
// holds of the processes it killed.
func (m *Monitor) nemesis(e *history.Event) {
	if e.Type == history.Invoke {
		m.nem = append(m.nem, *e)
		return
	}
	k := matchNemesis(len(m.nem), func(k int) *history.Event { return &m.nem[k] }, e)
	if k < 0 {
		return
	}
	op := readFault(&m.nem[k], e)
	m.nem = slices.Delete(m.nem, k, k+1)
	if !op.crashes(e) {
		return
	}
	for _, n := range op.Nodes {
		pid, ok := processOf(n)
		if !ok {
			continue
		}
		for _, h := range m.open.At(pid) {
			if h.dead || h.End <= e.Time {
				continue
			}
			h.End, h.EndedBy = max(e.Time, h.Start), endCrash
			h.Deadline = min(h.Deadline, h.End)
			m.undoRecent(h)
		}
		m.open.Delete(pid)
		delete(m.levels, pid)
	}
}

// leaseNews applies, as the checker does, a renewal or a loss the lock reported by itself to the
// process's open hold of that lease: a renewal moves its deadline later; a loss ends it there (a
// hold with no deadline lasts until its release or this news). Without it, the monitor would count
// as an overlap a grant to another client after the holder was told it had lost the lock, which the
// checker does not, and a run told to stop at its first violation would stop on nothing.
func (m *Monitor) leaseNews(e *history.Event) {
	hs := m.latest.At(e.Process)
	j := findLease(len(hs), func(j int) *hold { return hs[j] }, e.Key, e.Value)
	if j < 0 {
		return
	}
	h := hs[j]
	if e.F == history.FRenewed {
		m.renew(h, e)
		return
	}
	if h.dead || e.Time > h.End {
		return // the hold had ended: news of its loss changes nothing
	}
	if h.Deadline != Never && e.Time < h.Deadline {
		m.early++ // as the parser's leaseNews counts it
	}
	h.Deadline = e.Time
	h.End, h.EndedBy = max(e.Time, h.Start), endLost
	m.undoRecent(h)
}

// lost counts the completion e of a release or extend invoked at inv that the lock refused as
// lost before the deadline it promised: an early lease loss, by the checker's own rule.
func (m *Monitor) lost(inv, e *history.Event) {
	hs := m.latest.At(e.Process)
	if lostAt(len(hs), func(k int) *hold { return hs[k] }, inv, e) != nil {
		m.early++
	}
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

// EarlyLosses returns how many releases, extends and reports of the lock refused or dropped a
// lease before the deadline it had promised, in the events observed so far.
func (m *Monitor) EarlyLosses() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.early
}

// Violations returns how many overlapping pairs of holds the events observed so far contain.
func (m *Monitor) Violations() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count
}
