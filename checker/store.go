package checker

import (
	"cmp"
	"slices"
	"sort"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/internal/proctable"
)

// store is the history as the checker's steps look events up by position. Given the whole history
// (Check, CheckLog) it is that slice. Fed one event at a time (CheckFile), it keeps only what a
// later look-up can ask for, so memory does not grow with the number of client operations:
//
//   - for good: the first event, and every event of the nemesis, of the harness and of the
//     protected resource (read, write, final), which steps after the first pass walk again;
//   - while needed: the current and the previous event, and each client's invoke in flight.
//
// Every other event is gone once validate and parse have seen it, as is everything the holds,
// statistics and fault windows were built from.
type store struct {
	all []history.Event // the whole history, or nil when streaming
	log *history.Log    // its lines, with all

	n int // events seen
	// recent are the current and the previous event, recent[cur] the current: a push overwrites
	// the older in place rather than copying the current event down.
	recent     [2]history.Event
	cur        int
	keptPos    []int // positions of the events kept for good, increasing
	kept       []history.Event
	inflight   proctable.Table[*slot] // client process -> its invoke in flight
	byPos      []*slot                // the same, by increasing position
	free       []*slot                // slots to reuse
	lineShifts []lineShift            // where lines stop being position+1 (blank lines); empty for most files
}

// slot holds a client invoke while it is in flight.
type slot struct {
	pos int
	ev  history.Event
}

// lineShift: from position pos on, event i is on line i+1+add.
type lineShift struct{ pos, add int }

func sliceStore(l *history.Log) *store { return &store{all: l.Events, log: l, n: len(l.Events)} }

func streamStore() *store {
	return &store{}
}

// at is event i, which must be one the store keeps (see store). Most look-ups are of the current
// event while streaming: that case is small enough to be inlined at every call.
func (s *store) at(i int) *history.Event {
	if i == s.n-1 && s.all == nil {
		return &s.recent[s.cur]
	}
	return s.lookUp(i)
}

// lookUp is at for every other event.
func (s *store) lookUp(i int) *history.Event {
	if s.all != nil {
		return &s.all[i]
	}
	switch {
	case i == s.n-2:
		return &s.recent[s.cur^1]
	}
	// Most look-ups are of the current event's invoke in flight: found without a search.
	if sl, ok := s.inflight.Get(s.recent[s.cur].Process); ok && sl.pos == i {
		return &sl.ev
	}
	if k, ok := s.slotAt(i); ok {
		return &s.byPos[k].ev
	}
	k := sort.SearchInts(s.keptPos, i)
	if k == len(s.keptPos) || s.keptPos[k] != i {
		panic("checker: event no longer kept") // a look-up the retention rules above do not cover
	}
	return &s.kept[k]
}

// slotAt is where the in-flight invoke at position i is in byPos.
func (s *store) slotAt(i int) (int, bool) {
	return slices.BinarySearchFunc(s.byPos, i, func(sl *slot, i int) int { return cmp.Compare(sl.pos, i) })
}

// line is the 1-based line of event i in the file.
func (s *store) line(i int) int {
	if s.all != nil {
		return s.log.Line(i)
	}
	add := 0
	for _, ls := range s.lineShifts {
		if ls.pos > i {
			break
		}
		add = ls.add
	}
	return i + 1 + add
}

// last is the last event, nil for an empty history.
func (s *store) last() *history.Event {
	if s.n == 0 {
		return nil
	}
	return s.at(s.n - 1)
}

// push makes e, on the given line, the next event.
func (s *store) push(e *history.Event, line int) {
	s.cur ^= 1
	s.recent[s.cur] = *e
	if add := line - s.n - 1; add != s.lastAdd() {
		s.lineShifts = append(s.lineShifts, lineShift{pos: s.n, add: add})
	}
	s.n++
}

func (s *store) lastAdd() int {
	if len(s.lineShifts) == 0 {
		return 0
	}
	return s.lineShifts[len(s.lineShifts)-1].add
}

// settle decides, once validate and parse have seen the current event, whether it is kept.
func (s *store) settle() {
	i, e := s.n-1, &s.recent[s.cur]
	if i == 0 || keptForGood(e) {
		s.keptPos = append(s.keptPos, i)
		s.kept = append(s.kept, *e)
		return
	}
	if e.Process < 0 || e.F == history.FRenewed || e.F == history.FLost {
		return // news from the lock completes nothing: the process's operation stays in flight
	}
	if e.Type == history.Invoke {
		var sl *slot
		if k := len(s.free); k > 0 {
			sl, s.free = s.free[k-1], s.free[:k-1]
		} else {
			sl = &slot{}
		}
		sl.pos, sl.ev = i, *e
		s.inflight.Put(e.Process, sl)
		s.byPos = append(s.byPos, sl) // i is the largest position yet: the order holds
		return
	}
	if sl, ok := s.inflight.Get(e.Process); ok {
		s.inflight.Delete(e.Process)
		// Mostly one of the latest invokes: the few slots after it move down.
		if k, ok := s.slotAt(sl.pos); ok {
			s.byPos = slices.Delete(s.byPos, k, k+1)
		}
		s.free = append(s.free, sl)
	}
}

// keptForGood: events the steps after the first pass walk again.
func keptForGood(e *history.Event) bool {
	return e.Process == history.NemesisProcess || e.Process == history.HarnessProcess || e.Process == history.SystemProcess || isResourceOp(e.F)
}

func isResourceOp(f string) bool {
	return f == history.FRead || f == history.FWrite || f == history.FFinal
}

// resourcePositions are the positions of the resource events, in order.
func (s *store) resourcePositions() []int {
	var out []int
	if s.all != nil {
		for i := range s.all {
			if isResourceOp(s.all[i].F) {
				out = append(out, i)
			}
		}
		return out
	}
	for k, i := range s.keptPos {
		if isResourceOp(s.kept[k].F) {
			out = append(out, i)
		}
	}
	return out
}
