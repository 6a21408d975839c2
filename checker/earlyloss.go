package checker

import (
	"fmt"
	"strings"

	"github.com/lockpick-dev/lockpick/history"
)

// EarlyLoss is a release or extend that the lock answered with "lease no longer held" (reason lost)
// although it completed before the deadline the lock had promised for that lease. The request was
// processed no later than its completion, so the lock's servers had already dropped a lease the
// lock still promised: mutual exclusion was broken whether or not a second holder was observed.
// Judged by completion, not invoke: a release sent just before the deadline may land after it, and
// that is no finding.
type EarlyLoss struct {
	Key     string `json:"key"`
	Process int    `json:"process"`
	Value   string `json:"value,omitempty"`
	// F is release or extend; Invoke and Completed are its times; Deadline the promised end of the
	// lease and Early how long before it the refusal completed.
	F         string `json:"f"`
	Invoke    int64  `json:"invoke"`
	Completed int64  `json:"completed"`
	Deadline  int64  `json:"deadline"`
	Early     int64  `json:"early"`
	// Cause names the faults in effect between the lease's acquire and the refusal, or "no fault".
	Cause       string `json:"cause"`
	Description string `json:"description"`

	asked int64 // when the lease's acquire was invoked
}

// lostAt applies a release or extend completion e (invoked at inv) refused with reason lost
// (step 1): if it completed before the deadline of the lease it names, among the process's recent
// holds (renewals included), it is an early loss, kept for step 6d to name its cause. It needs no
// event but the completion and its invoke, so the streaming check can call it as the parser does.
// n and at are the process's recent holds, so the live Monitor applies the same rule to its own.
func lostAt(n int, at func(k int) *hold, inv, e *history.Event) *EarlyLoss {
	if e.Type != history.Fail || e.Reason != history.ReasonLost {
		return nil
	}
	k := findLease(n, at, inv.Key, inv.Value)
	if k < 0 {
		return nil
	}
	h := at(k)
	if h.Deadline == Never || e.Time >= h.Deadline {
		return nil
	}
	return &EarlyLoss{
		Key: h.key, Process: e.Process, Value: inv.Value, F: e.F, Invoke: inv.Time, Completed: e.Time,
		Deadline: h.Deadline, Early: h.Deadline - e.Time, asked: h.Invoke,
	}
}

// describe fills in the cause and the description once the fault windows are known (step 6d).
func (l *EarlyLoss) describe(faults []FaultWindow) {
	l.Cause = faultsBetween(faults, l.asked, l.Completed)
	l.Description = fmt.Sprintf("key %s: p%d's %s was refused as \"lease no longer held\" at %s, %s before the deadline %s the lock promised; cause: %s",
		l.Key, l.Process, l.F, FormatTime(l.Completed), FormatSpan(l.Early), FormatTime(l.Deadline), l.Cause)
}

// faultsBetween names the fault windows that overlap [from, to], or "no fault".
func faultsBetween(faults []FaultWindow, from, to int64) string {
	var names []string
	for _, f := range faults {
		if f.Start <= to && f.End >= from {
			names = append(names, f.describe())
		}
	}
	if len(names) == 0 {
		return "no fault"
	}
	return strings.Join(names, "; ")
}

// leaseFindings applies step 6d: early lease losses, each of which makes the lock-level verdict
// invalid, and late extends and renewals (renewHold), which are grants of their own (parser.revive)
// judged by the lock-level analyses like any other hold, and listed to name them.
func (r *Result) leaseFindings(p *parsed, limit int) {
	r.EarlyLossCount = len(p.earlyLosses)
	r.EarlyLosses = p.earlyLosses[:min(len(p.earlyLosses), limit)]
	for i := range r.EarlyLosses {
		r.EarlyLosses[i].describe(r.Faults)
	}
	r.LateExtendCount = len(p.lateExtends)
	r.LateExtends = p.lateExtends[:min(len(p.lateExtends), limit)]
	if r.EarlyLossCount > 0 && r.Valid == Valid {
		r.Valid = Invalid
	}
}

// summarizeLeaseFindings writes the early losses and late extends into the summary.
func (r *Result) summarizeLeaseFindings(b *strings.Builder, show int) {
	if r.EarlyLossCount > 0 {
		fmt.Fprintf(b, "early lease losses: %d releases or extends refused as \"lease no longer held\" before the promised deadline:\n", r.EarlyLossCount)
		listLines(b, len(r.EarlyLosses), r.EarlyLossCount, show, func(i int) string { return r.EarlyLosses[i].Description })
	}
	if r.LateExtendCount > 0 {
		fmt.Fprintf(b, "late extends and renewals: %d renewals (an extend's ok, or the lock's own renewed news) came after the lease had already ended (each a grant of its own from then on, a violation only where it overlapped another hold):\n", r.LateExtendCount)
		listLines(b, len(r.LateExtends), r.LateExtendCount, show, func(i int) string { return r.LateExtends[i].Description })
	}
}

// listLines writes the first show of n listed findings, one indented line each, and says how many
// of all more there are.
func listLines(b *strings.Builder, n, all, show int, line func(int) string) {
	for i := range n {
		if i == show {
			fmt.Fprintf(b, "  ... and %d more\n", all-show)
			return
		}
		fmt.Fprintf(b, "  %s\n", line(i))
	}
}
