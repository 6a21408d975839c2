package checker

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/lockpick-dev/lockpick/history"
)

// MinGrantsPerKey is the floor of rule (a) of Evidence: every key needs at least this many grants.
// One grant shows the lock can be reached and hand out a lease on the key at all; more would be
// arbitrary (a hot key under a restart nemesis legitimately sees few), and the statistics show how
// many there were.
const MinGrantsPerKey = 1

// Evidence is what a run shows of having exercised the lock, judged before a verdict of valid is
// given (after Jepsen's stats checker: a test that did nothing must not pass). Its rules:
//
//	(a) every key got at least MinGrantsPerKey grants: ok acquires whose lease had not expired on
//	    arrival. The keys are the plan's, or, for a history without a plan, every key an acquire
//	    named (a history with no acquire at all has no evidence).
//	(b) every planned nemesis (the plan's nemeses, none aside) applied at least one fault that
//	    completed without an error.
//	(c) the planned time ran: the run completed ok, or the history covers the plan's time_limit +
//	    recovery from the run's start, less a tolerance (see coverTolerance).
//
// A history without a plan (hand-made) cannot be judged on (b) and (c); a note says so. An empty
// history has no evidence. When a rule fails and nothing is invalid, the verdict is unknown and
// Result.UnknownReason names the first failing rule and the flag that fixes it; a violation found
// with too little evidence is still invalid.
type Evidence struct {
	// Enough is true when every rule that could be judged held.
	Enough bool `json:"enough"`
	// Keys are the keys rule (a) asks grants of; MinGrants is MinGrantsPerKey; Ungranted are the keys
	// that got fewer.
	Keys      []string `json:"keys"`
	MinGrants int      `json:"min_grants"`
	Ungranted []string `json:"ungranted,omitempty"`
	// Nemeses are the planned nemeses and what each applied (rule b).
	Nemeses []NemesisEvidence `json:"nemeses,omitempty"`
	// HasPlan is false for a history without a run plan: rules (b) and (c) are not judged.
	HasPlan bool `json:"has_plan"`
	// Planned is the plan's time_limit + recovery; Covered the time from the run's start (its invoke,
	// or the first event) to the last event. Nanoseconds.
	Planned int64 `json:"planned,omitempty"`
	Covered int64 `json:"covered"`
	// Ended says how the run ended: "ok" (the plan ran), "info" (cut short, EndError says why),
	// "killed" (the history has no end), or "" for a history with no run.
	Ended    string `json:"ended,omitempty"`
	EndError string `json:"end_error,omitempty"`
	// TimeRan is rule (c): the planned time ran.
	TimeRan bool `json:"time_ran"`
	// Edges are the lease edges the run exercised: no rule, but what a valid verdict covers.
	Edges *Edges `json:"edges,omitempty"`
}

// NemesisEvidence is what one planned nemesis did.
type NemesisEvidence struct {
	// Spec is the nemesis as planned ("restart:delay=10s"); Name its name, which its events carry
	// as their fault (a name with a variant, "restart-delayed", counts for "restart").
	Spec string `json:"spec"`
	Name string `json:"name"`
	// Tried counts its fault operations, Applied those that completed without an error.
	Tried     int    `json:"tried"`
	Applied   int    `json:"applied"`
	LastError string `json:"last_error,omitempty"`
}

// coverTolerance is how much of its planned time a run without an ok completion may lack and still
// count as having run it: 2% of the plan, between 100ms and 1s. A killed run's last events can lag
// the kill by the Recorder's flush interval, but not by seconds.
func coverTolerance(planned int64) int64 {
	return min(max(planned/50, 100e6), 1e9)
}

// evidenceKeys are the keys rule (a) asks grants of: the plan's, else every key an acquire named.
func evidenceKeys(run runInfo, s *Stats) []string {
	if run.plan != nil && len(run.plan.Keys) > 0 {
		return slices.Sorted(slices.Values(run.plan.Keys))
	}
	keys := make([]string, 0, len(s.AcquiresByKey))
	for k := range s.AcquiresByKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// gatherEvidence judges the rules of Evidence (step 8) and, when one fails, returns the sentence
// that says why and what to do about it.
func gatherEvidence(st *store, run runInfo, p *parsed, keys []string) (Evidence, string) {
	ev := Evidence{Keys: keys, MinGrants: MinGrantsPerKey, HasPlan: run.plan != nil}
	if st.n == 0 {
		return ev, "the history is empty: nothing was recorded, so nothing was checked; run lockpick run again and let it record"
	}
	start := st.at(0).Time
	if run.start >= 0 {
		start = st.at(run.start).Time
	}
	ev.Covered = st.at(st.n-1).Time - start
	switch {
	case run.end >= 0:
		ev.Ended = string(st.at(run.end).Type)
		ev.EndError = st.at(run.end).Error
	case run.start >= 0:
		ev.Ended = "killed"
	}

	grants := map[string]int{}
	if p.folded != nil {
		maps.Copy(grants, p.folded.grants)
	}
	for i := range p.holds {
		if !p.holds[i].dead {
			grants[p.holds[i].key]++
		}
	}
	for _, k := range keys {
		if grants[k] < MinGrantsPerKey {
			ev.Ungranted = append(ev.Ungranted, k)
		}
	}
	if run.plan != nil {
		ev.Planned = run.plan.TimeLimit + run.plan.Recovery
		ev.TimeRan = ev.Ended == "ok" || ev.Covered >= ev.Planned-coverTolerance(ev.Planned)
		ev.Nemeses = nemesisEvidence(st, p, run.plan.Nemeses)
	}

	// The first failing rule names the reason; a run cut short explains the rest, so it comes first.
	var reason string
	ran := secs(ev.Covered)
	switch {
	case run.plan != nil && !ev.TimeRan:
		reason = cutShort(&ev)
	case len(keys) == 0:
		reason = "the history has no acquire, so the lock was never exercised: run it with clients (--clients)"
	case len(ev.Ungranted) > 0:
		reason = ungranted(&ev, p, ran)
	default:
		for _, n := range ev.Nemeses {
			if n.Applied == 0 {
				reason = unapplied(n, ran)
				break
			}
		}
	}
	ev.Enough = reason == ""
	return ev, reason
}

func cutShort(ev *Evidence) string {
	of := fmt.Sprintf("%s of %s", secs(ev.Covered), secs(ev.Planned))
	switch ev.Ended {
	case "info":
		why := oneLine(ev.EndError)
		if why == "" {
			why = "cut short"
		}
		return fmt.Sprintf("the run was cut short at %s (%s): re-run it without interrupting it", of, why)
	case "killed":
		return fmt.Sprintf("the run was killed at %s (its history has no end): re-run it and let it finish", of)
	}
	return fmt.Sprintf("the history covers only %s of its plan: re-run it and let it finish", of)
}

// ungranted explains rule (a)'s failure by what most acquires of the first ungranted key met.
func ungranted(ev *Evidence, p *parsed, ran string) string {
	k := ev.Ungranted[0]
	name := "key " + k
	if k == "" {
		name = "the key \"\""
	}
	if n := len(ev.Ungranted) - 1; n > 0 {
		name += fmt.Sprintf(" (and %d more keys)", n)
	}
	c := p.stats.AcquiresByKey[k]
	tries := c.Total()
	if tries == 0 {
		return fmt.Sprintf("no client asked for %s in %s: raise --clients to at least --keys, or --time-limit", name, ran)
	}
	pct := func(n int) int { return 100 * n / tries }
	timeouts, errs, held, expired := c.Info+c.Pending, c.Fail-c.Held, c.Held, p.expired[k]
	head := fmt.Sprintf("no lock was granted on %s in %s", name, ran)
	switch max(timeouts, errs, held, expired) {
	case expired:
		return fmt.Sprintf("%s: all %d ok acquires arrived after their lease had expired; raise --ttl or lower --node-timeout", head, expired)
	case timeouts:
		return fmt.Sprintf("%s: %d%% of %d acquires timed out; raise --node-timeout or lower --clients", head, pct(timeouts), tries)
	case errs:
		return fmt.Sprintf("%s: %d%% of %d acquires failed with an error (nodes unreachable or no quorum); see lockpick.log, or choose a milder --nemesis", head, pct(errs), tries)
	}
	return fmt.Sprintf("%s: %d%% of %d acquires found it held, by a client whose own acquire never came back; raise --node-timeout", head, pct(held), tries)
}

func unapplied(n NemesisEvidence, ran string) string {
	if n.Tried == 0 {
		return fmt.Sprintf("the planned nemesis %s applied no fault in %s: raise --time-limit well above its --interval", n.Spec, ran)
	}
	last := ""
	if n.LastError != "" {
		last = " (last: " + oneLine(n.LastError) + ")"
	}
	return fmt.Sprintf("the planned nemesis %s tried %d faults in %s and none took effect without an error%s: see lockpick.log for why", n.Spec, n.Tried, ran, last)
}

// nemesisEvidence counts, for each planned nemesis, its fault operations and those that completed
// without an error (rule b). A nemesis's events carry its name as their fault.
func nemesisEvidence(st *store, p *parsed, specs []string) []NemesisEvidence {
	var out []NemesisEvidence
	for _, spec := range specs {
		name, _, _ := strings.Cut(strings.TrimSpace(spec), ":")
		if name == "" || name == "none" {
			continue
		}
		n := NemesisEvidence{Spec: spec, Name: name}
		for _, op := range p.nemOps {
			inv, _ := op.read(st)
			if inv.Effect != history.EffectFault || (inv.Fault != name && !strings.HasPrefix(inv.Fault, name+"-")) {
				continue
			}
			n.Tried++
			if op.comp < 0 {
				continue // never completed: whether it took effect is unknown
			}
			if c := st.at(op.comp); c.Type == history.Fail || c.Error != "" {
				n.LastError = c.Error
			} else {
				n.Applied++
			}
		}
		out = append(out, n)
	}
	return out
}

// describe renders the evidence for the summary, one line per rule.
// Lines are the evidence rules with what the history showed for each, one line a rule.
func (ev *Evidence) Lines() []string {
	var lines []string
	rule := fmt.Sprintf("(a) at least %d grant on every key: ", ev.MinGrants)
	switch {
	case len(ev.Keys) == 0:
		rule += "no: the history has no acquire"
	case len(ev.Ungranted) == 0:
		rule += fmt.Sprintf("yes, %d of %d keys", len(ev.Keys), len(ev.Keys))
	default:
		rule += fmt.Sprintf("no, %d of %d keys had none (%s)", len(ev.Ungranted), len(ev.Keys), strings.Join(firstN(ev.Ungranted, 5), ", "))
	}
	lines = append(lines, rule)
	if !ev.HasPlan {
		lines = append(lines, "(b), (c) planned faults applied, planned time ran: not judged, the history has no plan")
		return ev.edgeLine(lines)
	}
	if len(ev.Nemeses) == 0 {
		lines = append(lines, "(b) every planned nemesis applied a fault: yes, none was planned")
	}
	for _, n := range ev.Nemeses {
		lines = append(lines, fmt.Sprintf("(b) nemesis %s applied %d of %d faults without error", n.Spec, n.Applied, n.Tried))
	}
	ran := "yes"
	if !ev.TimeRan {
		ran = "no"
	}
	end := map[string]string{"ok": "the run completed", "info": "the run was cut short", "killed": "the run was killed"}[ev.Ended]
	if end == "" {
		end = "no end recorded"
	}
	lines = append(lines, fmt.Sprintf("(c) planned time ran: %s, covered %s of %s (%s)", ran, secs(ev.Covered), secs(ev.Planned), end))
	return ev.edgeLine(lines)
}

// edgeLine appends the lease edges' line, when they were gathered.
func (ev *Evidence) edgeLine(lines []string) []string {
	if ev.Edges == nil {
		return lines
	}
	return append(lines, ev.Edges.Line())
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(slices.Clip(s[:n]), "...")
	}
	return s
}

// secs renders a length as seconds with one decimal, "11.2s".
func secs(ns int64) string { return strconv.FormatFloat(float64(ns)/1e9, 'f', 1, 64) + "s" }

// oneLine keeps an error text to one short line, for a sentence that must stay one line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
