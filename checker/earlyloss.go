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
}

// promise is what a process was promised for one lease: since when it asked, and until when.
type promise struct {
	asked    int64
	deadline int64
}

// earlyLosses finds every EarlyLoss in a validated history (step 6d), listing at most limit. Each
// process's leases are tracked by key and value from the ok acquire that granted them and every ok
// extend that renewed them, so the deadline compared is the latest one the lock promised.
func earlyLosses(events []history.Event, faults []FaultWindow, limit int) (count int, out []EarlyLoss) {
	leases := map[int]map[string]promise{} // process -> key\x00value -> promise
	inflight := map[int]int{}
	id := func(key, value string) string { return key + "\x00" + value }
	for i := range events {
		e := &events[i]
		if e.Process < 0 {
			continue
		}
		if e.Type == history.Invoke {
			inflight[e.Process] = i
			continue
		}
		j, ok := inflight[e.Process]
		if !ok {
			continue
		}
		delete(inflight, e.Process)
		inv := &events[j]
		key := inv.Key
		if key == "" {
			key = e.Key
		}
		switch {
		case e.F == history.FAcquire && e.Type == history.OK && e.Deadline > 0:
			if leases[e.Process] == nil {
				leases[e.Process] = map[string]promise{}
			}
			leases[e.Process][id(key, e.Value)] = promise{asked: inv.Time, deadline: e.Deadline}
		case e.F == history.FExtend && e.Type == history.OK:
			if p, ok := leases[e.Process][id(key, inv.Value)]; ok && e.Deadline > p.deadline {
				p.deadline = e.Deadline
				leases[e.Process][id(key, inv.Value)] = p
			}
		case (e.F == history.FRelease || e.F == history.FExtend) && e.Type == history.Fail && e.Reason == history.ReasonLost:
			p, ok := leases[e.Process][id(key, inv.Value)]
			if !ok || e.Time >= p.deadline {
				break
			}
			count++
			if len(out) < limit {
				out = append(out, newEarlyLoss(key, inv, e, p, faults))
			}
		}
		if e.F == history.FRelease {
			delete(leases[e.Process], id(key, inv.Value))
		}
	}
	return count, out
}

func newEarlyLoss(key string, inv, e *history.Event, p promise, faults []FaultWindow) EarlyLoss {
	l := EarlyLoss{
		Key: key, Process: e.Process, Value: inv.Value, F: e.F, Invoke: inv.Time, Completed: e.Time,
		Deadline: p.deadline, Early: p.deadline - e.Time, Cause: faultsBetween(faults, p.asked, e.Time),
	}
	l.Description = fmt.Sprintf("key %s: p%d's %s was refused as \"lease no longer held\" at %s, %s before the deadline %s the lock promised; cause: %s",
		key, l.Process, l.F, FormatTime(l.Completed), FormatSpan(l.Early), FormatTime(l.Deadline), l.Cause)
	return l
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

// leaseFindings applies step 6d: early lease losses and late extends, each of which makes the
// lock-level verdict invalid.
func (r *Result) leaseFindings(events []history.Event, p *parsed, limit int) {
	r.EarlyLossCount, r.EarlyLosses = earlyLosses(events, r.Faults, limit)
	r.LateExtendCount = len(p.lateExtends)
	r.LateExtends = p.lateExtends[:min(len(p.lateExtends), limit)]
	if (r.EarlyLossCount > 0 || r.LateExtendCount > 0) && r.Valid == Valid {
		r.Valid = Invalid
	}
}

// summarizeLeaseFindings writes the early losses and late extends into the summary.
func (r *Result) summarizeLeaseFindings(b *strings.Builder, show int) {
	if r.EarlyLossCount > 0 {
		fmt.Fprintf(b, "early lease losses: %d releases or extends refused as \"lease no longer held\" before the promised deadline:\n", r.EarlyLossCount)
		for i, l := range r.EarlyLosses {
			if i == show {
				fmt.Fprintf(b, "  ... and %d more\n", r.EarlyLossCount-show)
				break
			}
			fmt.Fprintf(b, "  %s\n", l.Description)
		}
	}
	if r.LateExtendCount > 0 {
		fmt.Fprintf(b, "late extends: %d extends renewed a lease that had already ended:\n", r.LateExtendCount)
		for i, l := range r.LateExtends {
			if i == show {
				fmt.Fprintf(b, "  ... and %d more\n", r.LateExtendCount-show)
				break
			}
			fmt.Fprintf(b, "  %s\n", l.Description)
		}
	}
}
