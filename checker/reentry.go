package checker

import (
	"fmt"

	"github.com/lockpick-dev/lockpick/history"
)

// Re-entries and renewals (step 1), shared by the parser and the Monitor so that the online and
// offline checks judge them alike.
//
// Every ok acquire is a grant. One at depth above 1 continues the process's hold of the same lease
// only while that hold is still going at the re-entry's completion (not left at its outermost
// level, not lost, its deadline not passed, its process not crashed); the lock re-armed the lease,
// so the deadline the re-entry carries, if any, is the hold's from then on. Otherwise the re-entry
// is a hold of its own, judged against every other hold. A hold ends when its process has left
// every level it entered under it (the release invoke of the last one).

// level is one reentrant level a process entered: the hold it belongs to (an id in the parser, a
// pointer in the Monitor) and its depth.
type level[T comparable] struct {
	h     T
	depth int
}

// levelBook is, per process, the levels it entered and has not left.
type levelBook[T comparable] map[int][]level[T]

func (b levelBook[T]) enter(pid int, h T, depth int) {
	b[pid] = append(b[pid], level[T]{h, depth})
}

// move hands the levels the process entered under hold from over to hold to.
func (b levelBook[T]) move(pid int, from, to T) {
	for k := range b[pid] {
		if b[pid][k].h == from {
			b[pid][k].h = to
		}
	}
}

// leave removes the process's latest level at depth whose hold match accepts, and returns that
// hold and whether the process has now left every level of it. found is false when the process
// entered no such level (a retried release, or an id carrying on the levels of one it replaced).
func (b levelBook[T]) leave(pid, depth int, match func(T) bool) (h T, last, found bool) {
	ls := b[pid]
	for k := len(ls) - 1; k >= 0; k-- {
		if ls[k].depth != depth || !match(ls[k].h) {
			continue
		}
		h = ls[k].h
		ls = append(ls[:k], ls[k+1:]...)
		if len(ls) == 0 {
			delete(b, pid)
		} else {
			b[pid] = ls
		}
		for _, l := range ls {
			if l.h == h {
				return h, false, true
			}
		}
		return h, true, true
	}
	return h, false, false
}

// continued returns the position, among a process's n open holds, of the one that the ok acquire e
// at depth above 1 on key continues: the latest of the same lease still going when e completed.
// -1 when there is none, and e is a grant of its own.
func continued(n int, at func(int) *hold, key string, e *history.Event) int {
	for j := n - 1; j >= 0; j-- {
		h := at(j)
		if matchLease(h.key, h.Value, key, e.Value) && !h.dead && e.Time < h.End {
			return j
		}
	}
	return -1
}

// reenter applies to h the re-entry e that continues it: the lock re-armed the lease (Redisson's
// PEXPIRE), so the deadline e carries is the hold's, later or earlier; a promise starts when it is
// made, so it ends no earlier than e's completion.
func reenter(h *hold, e *history.Event) {
	if e.Deadline <= 0 {
		return
	}
	h.Deadline = max(e.Deadline, e.Time)
	h.End, h.EndedBy = holdEnd(h.Start, h.Deadline, Never)
}

// renewHold applies to h a renewal that completed at t promising deadline (0: none): an ok extend
// or the lock's own renewed event, judged by one rule. While the lease's promise lasts it moves the
// deadline (never earlier), and with it the end of a hold not yet released. Once the promise had
// ended (at the deadline, as a lease whose deadline is at its grant grants nothing; at the loss; or
// on arrival) it is late: it changes
// no hold, since between the old deadline and the renewal another client may have held the key,
// and renewHold reports it unless it renews a lease already counted late (see hold.lateTo) or its
// own deadline had passed on arrival (it promised nothing, as a lease expired on arrival grants
// nothing). A crashed process's hold takes no renewal: the news comes from a dead client.
func renewHold(h *hold, t, deadline int64) (late bool) {
	if h.EndedBy == endCrash {
		return false
	}
	if h.dead || t >= h.Deadline {
		if deadline > 0 && deadline <= t {
			return false // it renewed nothing: its own deadline had passed on arrival
		}
		counted := t <= h.lateTo
		h.lateTo = max(h.lateTo, effectiveDeadline(deadline))
		return !counted
	}
	if deadline > h.Deadline {
		h.Deadline = deadline
		if h.EndedBy == endExpiry {
			h.End = deadline
		}
	}
	return false
}

// endedWord says why the hold h of a re-entry judged as a new hold had ended: "its lease was lost
// at 2.000s".
func endedWord(h *hold) string {
	switch {
	case h.dead:
		return fmt.Sprintf("its lease had expired on arrival at %s", FormatTime(h.Start))
	case h.EndedBy == endLost:
		return "its lease was lost at " + FormatTime(h.End)
	case h.EndedBy == endCrash:
		return "it crashed at " + FormatTime(h.End)
	case h.EndedBy == endRelease:
		return "it left the lock at " + FormatTime(h.End)
	}
	return "its lease expired at " + FormatTime(h.Deadline)
}
