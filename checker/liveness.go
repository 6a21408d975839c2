package checker

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// Liveness verdicts.
const (
	LiveOK          = "ok"
	LiveDeadlock    = "deadlock"
	LiveUnavailable = "unavailable"
	LiveUnknown     = "unknown"
)

// Liveness is the run's liveness verdict: after the last fault healed, every key must be granted
// again within the longest a lease can outlive its holder (Plan.Expiry, else the TTL) plus a margin.
// A key refused as held all that time, with no hold the history can see, is a deadlock: its lock
// outlived every holder (a key set without expiry by a client that crashed before its EXPIRE). A
// deadlock makes the run invalid; a key refused for other reasons is reported as unavailable, and a
// recovery too short to tell leaves liveness unknown, never passed.
type Liveness struct {
	Verdict string `json:"verdict"`
	// Since is when the last fault healed (the history's start when there was none); Window how long
	// a key may stay unavailable after it.
	Since    int64             `json:"since"`
	Window   int64             `json:"window"`
	Findings []LivenessFinding `json:"findings,omitempty"`
	Note     string            `json:"note,omitempty"`
}

// LivenessFinding is a key that stayed unavailable after the last heal.
type LivenessFinding struct {
	Key  string `json:"key"`
	Kind string `json:"kind"`
	// From is when the key's last hold ended (or the last heal, if later); Until the last refusal.
	From     int64 `json:"from"`
	Until    int64 `json:"until"`
	Refusals int   `json:"refusals"`
	// Cause names the client crashes since the key's last grant, or the faults before From.
	Cause       string `json:"cause"`
	Description string `json:"description"`
}

// keyLive is what step 1 keeps per key for the liveness check: the refusals since its last grant,
// and when the last acquire since then that may have set the key anyway completed (an acquire that
// timed out, or failed for a reason other than the key being held: its write may have landed, and
// its key may live a whole lease).
type keyLive struct {
	lastGrant int64
	refusals  []refusal
	lastMaybe int64
}

type refusal struct {
	t    int64
	held bool
}

// acquired notes a completed acquire of key for the liveness check.
func (pr *parser) acquired(key string, e *history.Event) {
	if pr.p.live == nil {
		pr.p.live = map[string]*keyLive{}
	}
	kl := pr.lastLive.get(pr.p.live, key, func() *keyLive { return &keyLive{lastGrant: -1, lastMaybe: -1} })
	switch e.Type {
	case history.OK:
		kl.lastGrant, kl.refusals, kl.lastMaybe = e.Time, kl.refusals[:0], -1
	case history.Fail:
		held := e.Reason == history.ReasonHeld
		kl.refusals = append(kl.refusals, refusal{e.Time, held})
		if !held {
			kl.lastMaybe = e.Time
		}
	case history.Info:
		kl.lastMaybe = e.Time
	}
}

// longerRecovery is the advice to run long enough after the last heal to judge liveness, in the
// spelling of the run's options: its scenario file's field, or the flag.
func longerRecovery(plan *history.Plan, window int64) string {
	at := time.Duration(window).Round(time.Second)
	if plan.Scenario != "" {
		return fmt.Sprintf("set recovery: %s (or more) in %s", at, plan.Scenario)
	}
	return fmt.Sprintf("use a --recovery of at least %s", at)
}

// checkLiveness is step 6e.
func checkLiveness(st *store, run runInfo, p *parsed) *Liveness {
	if run.plan == nil || len(run.plan.Keys) == 0 {
		return nil // a hand-made history: no plan says what to expect
	}
	expiry := run.plan.Expiry
	if expiry <= 0 {
		expiry = run.plan.TTL
	}
	window := expiry + max(expiry, int64(time.Second))
	l := &Liveness{Verdict: LiveOK, Since: p.first, Window: window}
	for _, i := range p.nemesis {
		// A client program's own death is no planned fault to recover from: the dead holder's
		// hold ends there (lastEnd below), and liveness counts from it through that.
		if st.at(i).Fault != history.FaultClientExit {
			l.Since = max(l.Since, st.at(i).Time)
		}
	}
	lastEnd := map[string]int64{}
	if p.folded != nil {
		maps.Copy(lastEnd, p.folded.lastEnd)
	}
	for i := range p.holds {
		h := &p.holds[i]
		if !h.dead {
			lastEnd[h.key] = max(lastEnd[h.key], h.End)
		}
	}
	for _, key := range run.plan.Keys {
		if f, ok := stuck(key, p.live[key], max(l.Since, lastEnd[key]), expiry, window); ok {
			f.Cause = crashesSince(st, p, lastEnd[key]-expiry)
			f.Description = fmt.Sprintf("key %s: refused %d times (%s) from %s until %s, %s after it was last free to take, with no hold in sight; lease expiry %s",
				key, f.Refusals, f.Kind, FormatTime(f.From), FormatTime(f.Until), FormatSpan(f.Until-f.From), FormatSpan(expiry))
			if f.Cause != "" {
				f.Description += "; " + f.Cause
			}
			l.Findings = append(l.Findings, f)
		}
	}
	for _, f := range l.Findings {
		if f.Kind == LiveDeadlock || l.Verdict == LiveOK {
			l.Verdict = f.Kind
		}
	}
	if l.Verdict == LiveOK && p.last-l.Since < window {
		l.Verdict = LiveUnknown
		l.Note = fmt.Sprintf("the run went on %s after the last heal, less than the lease expiry plus a margin (%s): liveness was not judged; %s",
			FormatSpan(p.last-l.Since), FormatSpan(window), longerRecovery(run.plan, window))
	}
	return l
}

// stuck reports a key refused from `from` for longer than window: its last refusal came more than
// window after from, and it was refused ever since (no grant: the refusals are those since the last
// grant). It is a deadlock when mostly refused as held for longer than window after every key an
// acquire may have left had expired: a key no holder and no lease explains. Otherwise it is
// unavailable (acquires that time out or fail after setting the key keep it taken, a lock that
// refuses while its quorum is short).
func stuck(key string, kl *keyLive, from, expiry, window int64) (LivenessFinding, bool) {
	if kl == nil || len(kl.refusals) == 0 || kl.lastGrant > from {
		return LivenessFinding{}, false
	}
	f := LivenessFinding{Key: key, From: from}
	for _, r := range kl.refusals {
		if r.t >= from {
			f.Refusals++
			f.Until = r.t
		}
	}
	if f.Refusals == 0 || f.Until-from < window {
		return LivenessFinding{}, false
	}
	f.Kind = LiveUnavailable
	if unexplainedHeld(kl, max(from, kl.lastMaybe+expiry), window) {
		f.Kind = LiveDeadlock
	}
	return f, true
}

// unexplainedHeld reports whether the refusals from `from` on are mostly "held" and go on for
// longer than window.
func unexplainedHeld(kl *keyLive, from, window int64) bool {
	n, held, until := 0, 0, int64(-1)
	for _, r := range kl.refusals {
		if r.t < from {
			continue
		}
		n++
		until = r.t
		if r.held {
			held++
		}
	}
	return n > 0 && until-from >= window && 2*held > n
}

// crashesSince names the client crashes from `since` on: the usual cause of a lock that outlives
// every holder.
func crashesSince(st *store, p *parsed, since int64) string {
	var names []string
	for _, op := range p.nemOps {
		e := st.at(op.inv)
		f, comp := op.read(st)
		if !f.crashes(comp) || e.Time < since || len(f.Nodes) == 0 {
			continue
		}
		at := f.Value
		if at == "" {
			at = "a crash point"
		}
		names = append(names, fmt.Sprintf("%s crashed at %s (%s)", strings.Join(f.Nodes, " "), FormatTime(e.Time), at))
	}
	if len(names) == 0 {
		return ""
	}
	if len(names) > 5 {
		names = append(slices.Clone(names[:5]), fmt.Sprintf("and %d more", len(names)-5))
	}
	return "client crashes since: " + strings.Join(names, ", ")
}

// summarizeLiveness writes the run's liveness line and its findings.
func (r *Result) summarizeLiveness(b *strings.Builder) {
	l := r.Liveness
	if l == nil {
		return
	}
	switch l.Verdict {
	case LiveOK:
		fmt.Fprintf(b, "liveness: ok (every key was granted again within %s of the last heal at %s, or never refused)\n", FormatSpan(l.Window), FormatTime(l.Since))
	case LiveUnknown:
		fmt.Fprintf(b, "liveness: unknown: %s\n", l.Note)
	default:
		effect := "does not change the verdict"
		if l.Verdict == LiveDeadlock {
			effect = "makes the run invalid"
		}
		fmt.Fprintf(b, "liveness: %s (%s) after the last heal at %s:\n", strings.ToUpper(l.Verdict), effect, FormatTime(l.Since))
		for _, f := range l.Findings {
			fmt.Fprintf(b, "  %s\n", f.Description)
		}
	}
}
