package checker

import (
	"fmt"

	"github.com/lockpick-dev/lockpick/history"
)

// reason checks an event's reason against its operation: held and error explain a failed acquire,
// lost and error a failed release or extend. "lost" anywhere else would be read as early lease loss
// by nobody, so it is refused rather than ignored.
func (v *validator) reason(i int) error {
	e := v.at(i)
	switch e.Reason {
	case "", history.ReasonError:
		return nil
	case history.ReasonHeld:
		if e.F == history.FRelease || e.F == history.FExtend {
			return v.fail(i, "process %d's %s failed with reason %q: a failed release or extend gives %q or %q", e.Process, e.F, e.Reason, history.ReasonLost, history.ReasonError)
		}
		return nil
	case history.ReasonNotOwner:
		if e.F != history.FRelease || e.Type != history.Fail {
			return v.fail(i, "process %d's %s (%s) gives reason %q, which only a failed release may give (the process did not own the lock)", e.Process, e.F, e.Type, e.Reason)
		}
		return nil
	case history.ReasonLost:
		if e.F != history.FRelease && e.F != history.FExtend {
			return v.fail(i, "process %d's %s gives reason %q, which only a failed release or extend may give (the lease was no longer held)", e.Process, e.F, e.Reason)
		}
		if e.Type != history.Fail {
			return v.fail(i, "process %d's %s (%s) gives reason %q: only a fail completion has a reason", e.Process, e.F, e.Type, e.Reason)
		}
		return nil
	}
	return v.fail(i, "unknown reason %q: a failed acquire's reason is %q (another client holds the lock) or %q (a definite failure); a failed release's or extend's is %q (the lease was no longer held), %q (release only: not the owner) or %q",
		e.Reason, history.ReasonHeld, history.ReasonError, history.ReasonLost, history.ReasonNotOwner, history.ReasonError)
}

// extended checks the completion i of the extend invoked at j: it names the lease it renews (a key
// and value the checker can pair it with), and an ok one promises a deadline not before it was
// asked for, as an ok acquire does.
func (v *validator) extended(i, j int) error {
	e, inv := v.at(i), v.at(j)
	if inv.Key == "" {
		return v.fail(j, "process %d's extend names no key: an extend names the lease it renews (key and value)", e.Process)
	}
	if e.Key != "" && e.Key != inv.Key {
		return v.fail(i, "process %d's extend of key %q (line %d) completed for key %q", e.Process, inv.Key, v.line(j), e.Key)
	}
	if e.Type != history.OK {
		return nil
	}
	switch {
	case e.Deadline <= 0:
		return v.fail(i, "process %d's ok extend carries no deadline: an ok extend says until when the renewed lease is valid", e.Process)
	case e.Validity < 0:
		return v.fail(i, "process %d's renewed lease has a negative validity (%s)", e.Process, span(e.Validity))
	case e.Deadline < inv.Time:
		return v.fail(i, "process %d's renewed lease ends at %s, before its extend was invoked at %s on line %d", e.Process, span(e.Deadline), span(inv.Time), v.line(j))
	}
	return nil
}

// LateExtend is a renewal that completed after the lease it renewed had already ended: an ok
// extend (a late extend) or the lock's own renewed event (a late renewal). The lock renewed a lease
// it no longer promised. Like every ok that tells a process it holds a key, it is a grant: a new
// hold from its completion (see parser.revive), which breaks mutual exclusion exactly when it
// overlaps another client's hold (a renewal that revived a key another client held by then). By
// itself it is a finding that names the renewal, not a violation: a correct lock's owner-checked
// renewal can land just after the deadline it promised, while its key is still its own.
type LateExtend struct {
	Key     string `json:"key"`
	Process int    `json:"process"`
	Value   string `json:"value,omitempty"`
	// F is the renewal: "extend" (asked by the client) or "renewed" (made by the lock by itself).
	F string `json:"f,omitempty"`
	// Deadline is the deadline the renewal renewed (0 when the process held no such lease at all);
	// Invoke and Completed are the renewal's (equal for a renewed event); NewDeadline the deadline
	// it promised (0 for none).
	Deadline    int64  `json:"deadline"`
	Invoke      int64  `json:"invoke"`
	Completed   int64  `json:"completed"`
	NewDeadline int64  `json:"new_deadline"`
	Description string `json:"description"`
}

// Kind names the finding: "late renewal" for the lock's own renewal, else "late extend".
func (l LateExtend) Kind() string {
	if l.F == history.FRenewed {
		return "late renewal"
	}
	return "late extend"
}

// extendHold applies the ok extend e (invoked at inv) to the process's recent holds (step 1) by
// renewHold's rule, and returns it as a LateExtend when it came after its lease had ended.
func extendHold(at func(int32) *hold, recent []int32, inv, e *history.Event) *LateExtend {
	k := findLease(len(recent), func(k int) *hold { return at(recent[k]) }, inv.Key, inv.Value)
	late := &LateExtend{Key: inv.Key, Process: e.Process, Value: inv.Value, F: history.FExtend, Invoke: inv.Time, Completed: e.Time, NewDeadline: e.Deadline}
	if k < 0 {
		late.Description = fmt.Sprintf("key %s: p%d's extend completed ok at %s, but the process held no such lease", late.Key, late.Process, FormatTime(e.Time))
		return late
	}
	h := at(recent[k])
	late.Deadline = h.Deadline
	if !renewHold(h, e.Time, e.Deadline) {
		if !h.dead && e.Time <= h.Deadline {
			h.Extends++
		}
		return nil
	}
	late.Description = fmt.Sprintf("key %s: p%d's extend completed ok at %s, %s after the lease it renewed had ended at %s",
		late.Key, late.Process, FormatTime(e.Time), FormatSpan(e.Time-late.Deadline), FormatTime(late.Deadline))
	return late
}

// lateRenewal describes the lock's own renewal e of hold h that came after the lease had ended.
func lateRenewal(h *hold, deadline int64, e *history.Event) LateExtend {
	why := "had ended at " + FormatTime(deadline)
	if h.EndedBy == endLost {
		why = "was reported lost at " + FormatTime(deadline)
	}
	return LateExtend{
		Key: h.key, Process: e.Process, Value: h.Value, F: history.FRenewed, Deadline: deadline,
		Invoke: e.Time, Completed: e.Time, NewDeadline: e.Deadline,
		Description: fmt.Sprintf("key %s: p%d's lock renewed its lease by itself at %s, %s after the lease %s (a late renewal)",
			h.key, e.Process, FormatTime(e.Time), FormatSpan(e.Time-deadline), why),
	}
}

// nearDeadline counts the holds released within the last tenth of their validity.
func nearDeadline(holds []hold) int {
	n := 0
	for i := range holds {
		if nearDeadlineHold(&holds[i]) {
			n++
		}
	}
	return n
}

// nearDeadlineHold reports whether h was released within the last tenth of its validity.
func nearDeadlineHold(h *hold) bool {
	return !h.dead && h.EndedBy == endRelease && h.Deadline != Never && 10*(h.Deadline-h.End) <= h.Deadline-h.Start
}

// leaseEvent is step 1 for the completion e of a release or extend invoked at inv, recent being
// its process's latest holds: counts, renewals, late extends and early losses.
func (p *parsed) leaseEvent(recent []int32, inv, e *history.Event) {
	if e.F == history.FRelease {
		p.stats.Releases.add(e.Type)
		if e.Type == history.OK {
			if k := findLease(len(recent), func(k int) *hold { return p.at(recent[k]) }, inv.Key, inv.Value); k >= 0 {
				p.at(recent[k]).released = true
			}
		}
	} else {
		p.stats.Extends.add(e.Type)
	}
	if e.F == history.FExtend && e.Type == history.OK {
		if late := extendHold(p.at, recent, inv, e); late != nil {
			p.lateExtends = append(p.lateExtends, *late)
		}
	}
	if l := lostAt(len(recent), func(k int) *hold { return p.at(recent[k]) }, inv, e); l != nil {
		p.earlyLosses = append(p.earlyLosses, *l)
	}
}
