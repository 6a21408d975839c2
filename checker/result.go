package checker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockpick-dev/lockpick/history"
)

// Result is the checker's verdict on one history and the evidence for it. It marshals to the
// results.json form; all times in it are nanoseconds on the run clock (see FormatTime).
type Result struct {
	// Valid is the run's verdict: the lock-level one, combined with the data-level one when the
	// history has a resource (invalid if either is): true, false, or "unknown" in JSON.
	Valid Verdict `json:"valid"`
	// UnknownReason says, in one sentence, why Valid is unknown and what to do about it (for example
	// "the run was cut short at 11.2s of 35.0s (interrupted): re-run it without interrupting it");
	// empty unless Valid is unknown.
	UnknownReason string `json:"unknown_reason,omitempty"`
	// Evidence is what the history shows of having exercised the lock; valid needs enough of it.
	Evidence Evidence `json:"evidence"`
	// LockValid is the lock-level verdict alone: mutual exclusion, and tokens that only go up. The
	// evidence does not enter it.
	LockValid Verdict `json:"lock_valid"`
	// DecidedBy says which analysis decided the lock-level verdict: "porcupine+sweep" when porcupine
	// checked every segment and the sweep agreed, or the sweep alone on segments porcupine could not
	// check ("sweep (1 too long for porcupine)").
	DecidedBy string `json:"decided_by"`
	// Resource is the data-level check of a counter-workload history; nil for mutex histories.
	Resource *ResourceResult `json:"resource,omitempty"`
	// TokenRegressionCount counts ok acquires whose fencing token was not above that of an acquire of
	// the same key completed before they were invoked; any makes the lock-level verdict invalid.
	// TokenRegressions lists the first of each run of them (at most Options.MaxViolations).
	TokenRegressions     []TokenRegression `json:"token_regressions,omitempty"`
	TokenRegressionCount int               `json:"token_regression_count,omitempty"`
	// EarlyLosses are releases and extends that the lock refused as "lease no longer held" although
	// they completed before the deadline it had promised (see EarlyLoss); LateExtends are extends
	// that renewed a lease after it had ended. Either makes the lock-level verdict invalid.
	// Liveness is the verdict on availability after the last heal (nil for a history without a plan).
	Liveness        *Liveness    `json:"liveness,omitempty"`
	EarlyLosses     []EarlyLoss  `json:"early_losses,omitempty"`
	EarlyLossCount  int          `json:"early_loss_count,omitempty"`
	LateExtends     []LateExtend `json:"late_extends,omitempty"`
	LateExtendCount int          `json:"late_extend_count,omitempty"`
	// Culprits are operations that acted, or may have acted, on another client's lease (see
	// Culprit): warnings, which name the cause of violations no fault explains. LateReleaseCount
	// counts every release accepted after its lease had ended, with or without another holder.
	Culprits         []Culprit `json:"culprits,omitempty"`
	CulpritCount     int       `json:"culprit_count,omitempty"`
	LateReleaseCount int       `json:"late_release_count,omitempty"`
	// Porcupine is porcupine's own verdict on the holds: "ok", "illegal" or "unknown".
	Porcupine string `json:"porcupine"`
	// Violations lists overlapping holds, at most Options.MaxViolations of them.
	Violations []Violation `json:"violations"`
	// ViolationCount counts every overlapping pair, including those left out of Violations.
	ViolationCount int `json:"violation_count"`
	// Overruns lists holds whose protected work ended after the lease's deadline, at most
	// Options.MaxViolations of them. They do not change Valid.
	Overruns []Overrun `json:"overruns"`
	// OverrunCount counts every overrun, including those left out of Overruns.
	OverrunCount int `json:"overrun_count"`
	// FirstFinding is the earliest finding that makes the run invalid; nil when there is none.
	FirstFinding *FirstFinding `json:"first_finding,omitempty"`
	// ClientExits are the client program's deaths nobody asked for (a finding about the lock's
	// client that does not change Valid); nil when none died.
	ClientExits *ClientExits `json:"client_exits,omitempty"`
	// Stats are counts, latencies and availability of the run.
	Stats Stats `json:"stats"`
	// Faults are the windows during which the nemesis had a fault in effect.
	Faults []FaultWindow `json:"faults"`
	// Segments is how many independent porcupine partitions the holds were split into.
	Segments int `json:"segments"`
	// CheckDuration is how long Check took, in nanoseconds.
	CheckDuration time.Duration `json:"check_duration"`
	// Notes are facts about the history a reader should know (empty history, pending operations).
	Notes []string `json:"notes"`
	// Errors are internal inconsistencies of the checker itself; any entry makes Valid unknown.
	Errors []string `json:"errors"`

	// Kept for Visualize.
	model     porcupine.Model
	info      porcupine.LinearizationInfo
	visNote   string
	visualize bool
	pairs     []listedPair // the listed violations' holds, for culprits and annotations
	// lateWhileHeld counts the late releases that are culprits (another client held the key).
	lateWhileHeld int
}

// HoldInfo describes one hold: the window a successful acquire gave its process.
type HoldInfo struct {
	Process int    `json:"process"`
	Value   string `json:"value,omitempty"`
	Token   int64  `json:"token,omitempty"`
	// Invoke is when the acquire was invoked; Start when it completed ok (the hold begins).
	Invoke int64 `json:"invoke"`
	Start  int64 `json:"start"`
	// End is the earlier of the release's invoke time and the deadline, never before Start.
	End int64 `json:"end"`
	// EndedBy says what ended the hold: "release" or "expiry" ("never" when there was neither).
	EndedBy  string `json:"ended_by"`
	Deadline int64  `json:"deadline"`
	Validity int64  `json:"validity,omitempty"`
	// Nodes are the nodes that granted the lease.
	Nodes []string `json:"nodes,omitempty"`
	// WorkEnd is when the last protected work under this lease ended, 0 if there was none.
	WorkEnd int64 `json:"work_end,omitempty"`
	// Extends counts the ok extends that renewed this lease in time; Deadline is then the last
	// renewed deadline.
	Extends int `json:"extends,omitempty"`
	// Reentry, on an ok acquire at depth above 1 that came after its process's hold had ended, says
	// so: such a re-entry is a grant of its own ("re-entered at 3.000s (depth 2) after its lease
	// was lost at 2.000s").
	Reentry string `json:"reentry,omitempty"`
}

// Violation is two holds of one key that overlapped: mutual exclusion was broken.
type Violation struct {
	Key string   `json:"key"`
	A   HoldInfo `json:"a"`
	B   HoldInfo `json:"b"`
	// OverlapStart and OverlapEnd bound the time both holds were in effect; Overlap is its length.
	OverlapStart int64 `json:"overlap_start"`
	OverlapEnd   int64 `json:"overlap_end"`
	Overlap      int64 `json:"overlap"`
	// Nemesis are the nemesis events from the earlier acquire invoke to the end of the overlap.
	Nemesis []history.Event `json:"nemesis"`
	// Roles are the system's role changes (a failover) from the earlier acquire invoke to the end of
	// the overlap.
	Roles []history.Event `json:"roles,omitempty"`
	// Cause says which fault let the second client in: the nodes that granted both leases and what hit
	// them in between, or that nothing did; with no fault, the operation that did, first (Culprit).
	Cause string `json:"cause,omitempty"`
	// Culprit names the operation that made the second grant possible when no fault explains it
	// ("p0's release at 4.210s, 300.0ms after its lease ended at 3.910s, deleted p7's key ...").
	Culprit string `json:"culprit,omitempty"`
	// Description is the violation in one line of text.
	Description string `json:"description"`
}

// Overrun is a hold whose protected work ended after the lease's deadline.
type Overrun struct {
	Key      string `json:"key"`
	Process  int    `json:"process"`
	Value    string `json:"value,omitempty"`
	Deadline int64  `json:"deadline"`
	WorkEnd  int64  `json:"work_end"`
	// Past is how long after the deadline the work ended.
	Past        int64  `json:"past"`
	Description string `json:"description"`
}

// FaultWindow is one nemesis fault operation, from its invoke until the last of its nodes healed
// (or the end of the history).
type FaultWindow struct {
	Fault string   `json:"fault"`
	F     string   `json:"f"`
	Nodes []string `json:"nodes,omitempty"`
	Start int64    `json:"start"`
	End   int64    `json:"end"`
	// Applied is when the fault operation completed, Lifted when the heal that ended it began: between
	// the two the fault was certainly in effect.
	Applied int64 `json:"applied"`
	Lifted  int64 `json:"lifted"`
	// Healed is false when the history ended before every node was healed.
	Healed      bool   `json:"healed"`
	Description string `json:"description"`
}

// Counts counts completions of one kind of operation by outcome.
type Counts struct {
	OK   int `json:"ok"`
	Fail int `json:"fail"`
	// Held counts the fails of acquires whose reason was that another client held the lock (the lock
	// working as designed); the other fails are errors (reason error, or none given).
	Held int `json:"held,omitempty"`
	Info int `json:"info"`
	// Pending counts invocations that never completed (the history ended first); they are
	// indeterminate like info but have no latency.
	Pending int `json:"pending,omitempty"`
}

// Total is the number of invoked operations.
func (c Counts) Total() int { return c.OK + c.Fail + c.Info + c.Pending }

// Latency holds latency percentiles in milliseconds.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Stats are the run's statistics. They never decide between valid and invalid; Evidence, built from
// some of them, decides whether valid can be said at all.
type Stats struct {
	Acquires      Counts            `json:"acquires"`
	AcquiresByKey map[string]Counts `json:"acquires_by_key"`
	Releases      Counts            `json:"releases"`
	// Extends counts lease renewals (workloads that extend their leases).
	Extends Counts `json:"extends"`
	// Renewals counts the renewals a lock made by itself (renewed events: a watchdog, a keepalive);
	// Losses the leases it reported lost by itself; Reentries the ok acquires by a process that
	// already held the key (a reentrant lock's inner levels); LateReentries the ok acquires at depth
	// above 1 whose process's hold had ended (lost, expired, left, crashed): each a hold of its own.
	Renewals int `json:"renewals,omitempty"`
	// ForeignUnlocks are releases by a process of a lock it did not hold: refused as not the
	// owner's, or accepted (the lock let a non-owner free it; a cause for a violation to look for).
	ForeignUnlocks struct {
		Refused  int `json:"refused"`
		Accepted int `json:"accepted"`
	} `json:"foreign_unlocks"`
	Losses        int `json:"losses,omitempty"`
	Reentries     int `json:"reentries,omitempty"`
	LateReentries int `json:"late_reentries,omitempty"`
	// NearDeadline counts the holds released within the last tenth of their validity (from the
	// acquire's completion to the deadline, renewals included): how often the workload reached the
	// edge of a lease, where bugs that shorten leases show.
	NearDeadline int `json:"near_deadline"`
	// AcquiresOKShare ("acquires ok") is the share of acquires that completed ok (0 when there were
	// none); on a hot key most acquires meet a held lock, so it is no measure of availability.
	AcquiresOKShare float64 `json:"acquires_ok_share"`
	// HeldShare ("held") is the share of the run's time during which someone held the lock (the union of the holds of a key over the history's span, averaged over the
	// keys); GrantsPerSecond the holds (ok acquires not expired on arrival) per second of the
	// span; ErrorShare the share of
	// completed acquires that failed with an error or timed out (info), leaving out those refused
	// because another client held the lock.
	HeldShare       float64 `json:"held_share"`
	GrantsPerSecond float64 `json:"grants_per_second"`
	ErrorShare      float64 `json:"error_share"`
	// ExpiredOnArrival counts ok acquires whose lease had already expired when they completed: they
	// grant no hold and are not in Holds.
	ExpiredOnArrival int `json:"expired_on_arrival"`
	// LatencyOK is the latency of ok acquires; LatencyAll of every completed acquire.
	LatencyOK  Latency `json:"acquire_latency_ok"`
	LatencyAll Latency `json:"acquire_latency_all"`
	Holds      int     `json:"holds"`
	Processes  int     `json:"processes"`
	// Duration is the time from the first to the last event, in nanoseconds.
	Duration int64 `json:"duration"`
	// OKInFaults and OKOutsideFaults split ok acquires by whether they completed inside a fault window.
	OKInFaults      int `json:"ok_in_faults"`
	OKOutsideFaults int `json:"ok_outside_faults"`
	// OKWhollyInFaults counts ok acquires invoked and completed while one fault was certainly in
	// effect (between its Applied and Lifted): leases granted despite that fault, with no chance that
	// the request slipped through before the fault began.
	OKWhollyInFaults int `json:"ok_wholly_in_faults"`
	// Promised is the validity the lock promised its holds at their grant (deadline less the
	// acquire's completion), over the holds that had a deadline; Unbounded counts those that had
	// none (a watchdog lease lasts until its release).
	Promised  Latency `json:"promised_validity"`
	Unbounded int     `json:"unbounded_holds,omitempty"`
	// Regrants say, per fault, how soon the lock was granted again after the fault took effect.
	Regrants []Regrant `json:"regrants,omitempty"`
}

// Summary renders the result as a short human-readable text.
func (r *Result) Summary() string {
	var b strings.Builder
	b.WriteString(r.VerdictLines())
	porc := fmt.Sprintf("porcupine %s, %d segments", r.Porcupine, r.Segments)
	if r.Resource != nil {
		porc = fmt.Sprintf("lock model: porcupine %s, %d segments; counter model: porcupine %s, %d segments",
			r.Porcupine, r.Segments, r.Resource.Porcupine, r.Resource.Segments)
	}
	fmt.Fprintf(&b, "checked in %s: valid=%s; %s\n", r.CheckDuration.Round(time.Millisecond), r.Valid.jsonWord(), porc)
	fmt.Fprintf(&b, "lock level decided by: %s\n", r.DecidedBy)
	fmt.Fprintf(&b, "evidence (valid needs all of it; invalid needs none):\n")
	for _, line := range r.Evidence.Lines() {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	if r.Resource != nil {
		fmt.Fprintf(&b, "%s\n", r.Verdicts())
	}
	r.summarizeLiveness(&b)
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "checker error: %s\n", e)
	}
	fmt.Fprintf(&b, "overlapping holds: %d pairs", r.ViolationCount)
	if r.ViolationCount > len(r.Violations) {
		fmt.Fprintf(&b, " (%d listed)", len(r.Violations))
	}
	b.WriteString("\n")
	const show = 10
	for i, v := range r.Violations {
		if i == show {
			fmt.Fprintf(&b, "  ... and %d more\n", r.ViolationCount-show)
			break
		}
		fmt.Fprintf(&b, "  %s\n", v.Description)
		if v.Cause != "" {
			fmt.Fprintf(&b, "    cause: %s\n", v.Cause)
		}
	}
	if r.TokenRegressionCount > 0 {
		fmt.Fprintf(&b, "token regressions: %d acquires got a token not above an earlier one; the first of each run:\n", r.TokenRegressionCount)
		for i, t := range r.TokenRegressions {
			if i == show {
				fmt.Fprintf(&b, "  ... and %d more runs\n", len(r.TokenRegressions)-show)
				break
			}
			fmt.Fprintf(&b, "  %s\n", t.Description)
		}
	}
	r.summarizeLeaseFindings(&b, show)
	r.summarizeClientExits(&b, show)
	r.summarizeCulprits(&b, show)
	if res := r.Resource; res != nil {
		fmt.Fprintf(&b, "data (guard %s): porcupine %s on the counter model, %d segments; reads %d ok %d fail; writes %d accepted, %d rejected, %d unknown\n",
			res.Guard, res.Porcupine, res.Segments, res.Reads.OK, res.Reads.Fail, res.Writes.OK, res.Writes.Fail, res.Writes.Info)
		if res.HasFinal {
			fmt.Fprintf(&b, "  counter: %d -> %d after %d accepted increments: %d lost updates\n", res.Initial, res.Final, res.Writes.OK, res.LostUpdates)
		}
		fmt.Fprintf(&b, "  stale writes accepted: %d; stale writes rejected by the guard: %d\n", res.StaleWriteCount, res.RejectedStale)
		for i, sw := range res.StaleWrites {
			if i == show {
				fmt.Fprintf(&b, "  ... and %d more\n", res.StaleWriteCount-show)
				break
			}
			fmt.Fprintf(&b, "  %s\n", sw.Description)
		}
		for _, e := range res.Errors {
			fmt.Fprintf(&b, "  data checker error: %s\n", e)
		}
		for _, n := range res.Notes {
			fmt.Fprintf(&b, "  data note: %s\n", n)
		}
	}
	fmt.Fprintf(&b, "overruns: %d (work ended after the lease deadline; does not affect the verdict)\n", r.OverrunCount)
	for i, o := range r.Overruns {
		if i == show {
			fmt.Fprintf(&b, "  ... and %d more\n", r.OverrunCount-show)
			break
		}
		fmt.Fprintf(&b, "  %s\n", o.Description)
	}
	s := r.Stats
	fmt.Fprintf(&b, "acquires: %d ok, %d refused because held, %d failed with an error, %d timed out (info), %d pending; %d holds by %d processes over %s",
		s.Acquires.OK, s.Acquires.Held, s.Acquires.Fail-s.Acquires.Held, s.Acquires.Info, s.Acquires.Pending,
		s.Holds, s.Processes, FormatTime(s.Duration))
	if s.ExpiredOnArrival > 0 {
		fmt.Fprintf(&b, "; %d ok acquires expired on arrival (no hold)", s.ExpiredOnArrival)
	}
	fmt.Fprintf(&b, "\nheld: %.1f%% of the time some client held the lock (mean over %d keys); %.2f grants/s\n",
		100*s.HeldShare, len(r.Evidence.Keys), s.GrantsPerSecond)
	fmt.Fprintf(&b, "acquires ok: %.1f%% of acquires granted; error share %.1f%% (errors and timeouts of completed acquires; refusals because held are not errors)\n",
		100*s.AcquiresOKShare, 100*s.ErrorShare)
	fmt.Fprintf(&b, "releases: %d ok, %d fail, %d info; %d holds released in the last tenth of their validity\n", s.Releases.OK, s.Releases.Fail, s.Releases.Info, s.NearDeadline)
	if s.Renewals+s.Losses+s.Reentries+s.LateReentries > 0 {
		fmt.Fprintf(&b, "the lock's own news: %d renewals, %d leases reported lost; %d re-entries by the owner", s.Renewals, s.Losses, s.Reentries)
		if s.LateReentries > 0 {
			fmt.Fprintf(&b, ", %d re-entries after the owner's hold had ended (judged as holds of their own)", s.LateReentries)
		}
		b.WriteString("\n")
	}
	if f := s.ForeignUnlocks; f.Refused+f.Accepted > 0 {
		fmt.Fprintf(&b, "unlocks by a process that did not hold the lock: %d refused as not the owner's, %d accepted\n", f.Refused, f.Accepted)
	}
	if s.Extends.Total() > 0 {
		fmt.Fprintf(&b, "extends: %d ok, %d fail, %d info\n", s.Extends.OK, s.Extends.Fail, s.Extends.Info)
	}
	fmt.Fprintf(&b, "acquire latency ok: p50 %.2fms p90 %.2fms p99 %.2fms max %.2fms; all: p50 %.2fms p99 %.2fms max %.2fms\n",
		s.LatencyOK.P50, s.LatencyOK.P90, s.LatencyOK.P99, s.LatencyOK.Max, s.LatencyAll.P50, s.LatencyAll.P99, s.LatencyAll.Max)
	fmt.Fprintf(&b, "fault windows: %d; ok acquires inside faults: %d (%d asked and granted while a fault was surely in effect), outside: %d\n", len(r.Faults), s.OKInFaults, s.OKWhollyInFaults, s.OKOutsideFaults)
	for i, f := range r.Faults {
		if i == show {
			fmt.Fprintf(&b, "  ... and %d more\n", len(r.Faults)-show)
			break
		}
		fmt.Fprintf(&b, "  %s%s\n", f.describe(), regrantNote(s.Regrants, i))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}

// VerdictLines are the summary's first lines: the verdict naming what made it, why it is unknown,
// and the first finding. They are all a caller must print before anything can fail.
func (r *Result) VerdictLines() string {
	var b strings.Builder
	fmt.Fprintf(&b, "verdict: %s\n", r.Headline())
	if r.UnknownReason != "" {
		fmt.Fprintf(&b, "unknown because %s\n", r.UnknownReason)
	}
	if f := r.FirstFinding; f != nil {
		fmt.Fprintf(&b, "first finding: %s at %s: %s\n", FindingName(f.Kind), FormatTime(f.At), strings.Join(strings.Fields(f.Description), " "))
	}
	return b.String()
}

// regrantNote says how soon after fault i took effect the lock was granted again.
func regrantNote(rs []Regrant, i int) string {
	if i >= len(rs) {
		return ""
	}
	if rs[i].Grant < 0 {
		return "; no grant after it took effect"
	}
	return fmt.Sprintf("; next grant %s after it took effect", FormatTime(rs[i].Gap))
}

func (f FaultWindow) describe() string {
	end := FormatTime(f.End)
	if !f.Healed {
		end += " (not healed)"
	}
	name := f.Fault
	if f.F != "" && f.F != f.Fault {
		name += " (" + f.F + ")"
	}
	return fmt.Sprintf("%s %s [%s, %s]", name, strings.Join(f.Nodes, " "), FormatTime(f.Start), end)
}

func describeHold(h HoldInfo) string {
	s := fmt.Sprintf("p%d held [%s, %s]", h.Process, FormatTime(h.Start), FormatTime(h.End))
	if h.Reentry != "" {
		s = fmt.Sprintf("p%d %s and held [%s, %s]", h.Process, h.Reentry, FormatTime(h.Start), FormatTime(h.End))
	}
	if len(h.Nodes) > 0 {
		s += " granted by " + strings.Join(h.Nodes, " ")
	}
	if h.Value != "" {
		s += " (value " + h.Value + ")"
	}
	return s
}

func describeViolation(v *Violation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key %s: %s and %s: overlap %s", v.Key, describeHold(v.A), describeHold(v.B), FormatSpan(v.Overlap))
	if len(v.Nemesis) > 0 {
		// The text names each nemesis operation once, at its invoke; results.json keeps every event.
		var ops []string
		for i, e := range v.Nemesis {
			if e.Type == history.Invoke {
				ops = append(ops, describeNemesisEvent(e, completionOf(v.Nemesis, i)))
			}
		}
		if len(ops) > 0 {
			b.WriteString("; faults inside: " + strings.Join(ops, ", "))
		}
	}
	return b.String()
}

// describeNemesisEvent names a nemesis event; done, when known, is the completion of an invoke (it
// carries the clock offsets measured after the operation).
func describeNemesisEvent(e history.Event, done *history.Event) string {
	var b strings.Builder
	b.WriteString(e.F)
	if e.Type != history.Invoke {
		b.WriteString(" " + string(e.Type))
	}
	if len(e.Offsets) > 0 {
		b.WriteString(" " + describeOffsets(e, done))
	} else {
		for _, n := range e.Nodes {
			b.WriteString(" " + n)
		}
	}
	b.WriteString(" at " + FormatTime(e.Time))
	return b.String()
}

// describeOffsets reads "n3 by +4s (measured +4.001s)" for each node of a clock operation: the
// offset set, from the invoke, and the offset measured, from the completion.
func describeOffsets(e history.Event, done *history.Event) string {
	var parts []string
	for _, n := range e.Nodes {
		set, ok := e.Offsets[n]
		if !ok {
			parts = append(parts, n)
			continue
		}
		// A jump moves a clock by its offset; a reset sets it back to (an offset from) the real time.
		word := " by "
		if e.Effect == history.EffectHeal {
			word = " to "
		}
		part := n + word + formatOffset(set)
		if done != nil {
			if got, ok := done.Offsets[n]; ok {
				part += " (measured " + formatOffset(got) + ")"
			}
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

// formatOffset is a signed clock offset: "+4s", "-2.5s", "+4.001s".
func formatOffset(ns int64) string {
	d := time.Duration(ns).Round(time.Millisecond)
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return sign + d.String()
}

// completionOf finds the completion of the nemesis invoke events[i] among the events after it: the
// next completion of the same nemesis and operation on the same nodes.
func completionOf(events []history.Event, i int) *history.Event {
	e := events[i]
	for j := i + 1; j < len(events); j++ {
		c := events[j]
		if c.Type != history.Invoke && c.Fault == e.Fault && c.F == e.F && slices.Equal(c.Nodes, e.Nodes) {
			return &events[j]
		}
	}
	return nil
}

// Verdicts says the lock-level and data-level verdicts side by side, for example
// "lock: valid (with 3 overruns), data: invalid, 7 lost updates".
func (r *Result) Verdicts() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lock: %s", r.LockValid)
	var extra []string
	for _, t := range []Tally{{FindingViolation, r.ViolationCount}, {FindingTokenRegression, r.TokenRegressionCount},
		{FindingEarlyLoss, r.EarlyLossCount}, {FindingLateExtend, r.LateExtendCount}} {
		if t.Count > 0 {
			extra = append(extra, Phrase(t.Kind, t.Count))
		}
	}
	if r.OverrunCount > 0 {
		extra = append(extra, fmt.Sprintf("with %d overruns", r.OverrunCount))
	}
	if len(extra) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(extra, ", "))
	}
	if res := r.Resource; res != nil {
		fmt.Fprintf(&b, ", data: %s", res.Valid)
		if res.HasFinal {
			fmt.Fprintf(&b, ", %s", Phrase(FindingLostUpdate, int(res.LostUpdates)))
		}
		fmt.Fprintf(&b, ", %s accepted", Phrase(FindingStaleWrite, res.StaleWriteCount))
	}
	return b.String()
}
