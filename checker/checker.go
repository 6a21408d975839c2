// Package checker decides whether a lock kept mutual exclusion in a recorded history.
//
// Check is a pipeline of named steps: build holds from the history, check them with porcupine
// under a mutex model, find every overlapping pair with an interval sweep and explain it, combine
// the two into a verdict, report overruns, compute statistics and fault windows, and keep what the
// visualization needs. Porcupine and the sweep are independent analyses of the same holds; if they
// ever disagree the verdict is unknown and the disagreement is reported as a checker error.
package checker

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockpick-dev/lockpick/history"
)

// Options tune Check; the zero value gives working defaults.
type Options struct {
	// Timeout bounds porcupine's search over all segments (default 60s; negative means no limit).
	// The visualization pass gets the time left, and at least a tenth of Timeout, on top.
	Timeout time.Duration
	// MaxViolations caps how many violations and overruns are listed (default 1000); all are counted.
	MaxViolations int
	// MaxVisualizedOps is the number of porcupine operations above which the visualization shows
	// only segments that failed or contain a violation (default 20000).
	MaxVisualizedOps int
}

// The defaults of Options.
const (
	DefaultTimeout          = 60 * time.Second
	DefaultMaxViolations    = 1000
	DefaultMaxVisualizedOps = 20000
)

func (o Options) withDefaults() Options {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxViolations <= 0 {
		o.MaxViolations = DefaultMaxViolations
	}
	if o.MaxVisualizedOps <= 0 {
		o.MaxVisualizedOps = DefaultMaxVisualizedOps
	}
	return o
}

// Check reads a history and returns the lock-level verdict with its evidence. It returns an error,
// and no verdict, only when the history is malformed (a completion without an invoke, two
// operations in flight on one process, an unknown event type).
func Check(events []history.Event, opts Options) (*Result, error) {
	return check(events, opts, true)
}

// check is Check with quiet-point splitting optional, so tests can show splitting changes nothing.
func check(events []history.Event, opts Options, split bool) (*Result, error) {
	began := time.Now()
	opts = opts.withDefaults()
	timeout := max(opts.Timeout, 0)

	// Step 1: holds.
	p, err := parse(events)
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	r := &Result{
		Violations: []Violation{},
		Overruns:   []Overrun{},
		Notes:      append([]string{}, p.notes...),
		Errors:     []string{},
	}
	keys, byKey := keyOrder(p.holds)

	// Step 2: lock-level check with porcupine, one segment at a time.
	model := lockModel(p.holds)
	segs := segmentsOf(p.holds, keys, byKey, split)
	r.Segments = len(segs)
	porcStart := time.Now()
	out := checkSegments(model, p.holds, segs, timeout)
	r.Porcupine = porcupineWord(out.result)
	if out.timedOut > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("porcupine ran out of time (%s) on %d of %d segments", opts.Timeout, out.timedOut, len(segs)))
	}
	if out.tooLarge > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d segments had more than %d porcupine operations and were left to the interval sweep", out.tooLarge, maxSegmentOps))
	}

	// Step 3: interval analysis and explanations.
	segOf := make([]int32, len(p.holds))
	for i := range segs {
		for _, id := range segs[i].holds {
			segOf[id] = int32(i)
		}
	}
	for _, k := range keys {
		sweep(p.holds, byKey[k], func(pr pair) {
			r.ViolationCount++
			segs[segmentOfPair(p.holds, segOf, pr)].violations++
			if len(r.Violations) < opts.MaxViolations {
				r.Violations = append(r.Violations, explain(events, p, pr))
				r.pairs = append(r.pairs, pr)
			}
		})
	}

	// Step 4: verdict.
	r.Valid = verdict(out.result, r.ViolationCount, &r.Errors)
	for i := range segs {
		// Per-segment cross-check: the two analyses must agree on every decided segment too.
		s := &segs[i]
		if (s.result == porcupine.Illegal) != (s.violations > 0) && s.result != porcupine.Unknown {
			r.Valid = Unknown
			r.Errors = append(r.Errors, fmt.Sprintf("checker disagreement on key %q, segment %d: porcupine says %s but the sweep found %d overlaps",
				s.key, i, porcupineWord(s.result), s.violations))
		}
	}
	if len(p.holds) == 0 {
		r.Notes = append(r.Notes, "the history has no successful acquires, so there was nothing to check: valid, trivially")
	}

	// Step 5: overruns.
	for i := range p.holds {
		h := &p.holds[i]
		if h.WorkEnd == 0 || h.Deadline == Never || h.WorkEnd <= h.Deadline {
			continue
		}
		r.OverrunCount++
		if len(r.Overruns) < opts.MaxViolations {
			o := Overrun{Key: h.key, Process: h.Process, Value: h.Value, Deadline: h.Deadline, WorkEnd: h.WorkEnd, Past: h.WorkEnd - h.Deadline}
			o.Description = fmt.Sprintf("key %s: p%d worked until %s, %s past its deadline %s", o.Key, o.Process, FormatTime(o.WorkEnd), FormatSpan(o.Past), FormatTime(o.Deadline))
			r.Overruns = append(r.Overruns, o)
		}
	}

	// Step 6: statistics and fault windows.
	r.Stats = p.stats
	r.Stats.LatencyOK = latency(p.okLat)
	r.Stats.LatencyAll = latency(p.allLat)
	if n := r.Stats.Acquires.Total(); n > 0 {
		r.Stats.Availability = float64(r.Stats.Acquires.OK) / float64(n)
	}
	r.Faults = faultWindows(events, p)
	if r.Faults == nil {
		r.Faults = []FaultWindow{}
	}
	r.Stats.OKInFaults, r.Stats.OKOutsideFaults = faultSplit(p.holds, r.Faults)
	r.Stats.OKWhollyInFaults = whollyInFaults(p.holds, r.Faults)

	// Step 6b: the lock's fencing tokens must only go up.
	var regressions int
	regressions, r.TokenRegressions = tokenRegressions(events, p, opts.MaxViolations)
	r.TokenRegressionCount = regressions
	if regressions > 0 && r.Valid == Valid {
		r.Valid = Invalid
	}
	r.LockValid = r.Valid

	// Step 6c: the data the lock protects (counter workload), and the run's verdict from both.
	r.Resource = checkResource(events, p.holds, r.Faults, opts)
	if r.Resource != nil {
		r.Valid = combine(r.LockValid, r.Resource.Valid)
	}

	// Step 7: what Visualize needs.
	budget := time.Duration(0)
	if timeout > 0 {
		budget = max(timeout-time.Since(porcStart), timeout/10)
	}
	r.prepareVisualization(model, p.holds, segs, segOf, opts.MaxVisualizedOps, budget)

	r.CheckDuration = time.Since(began)
	return r, nil
}

// verdict combines porcupine's result with the sweep's count of overlaps (step 4). An overlap the
// sweep found is a concrete counterexample, so it decides a timed-out search; anything else where the
// two disagree is a bug in lockpick and must not be papered over.
func verdict(porc porcupine.CheckResult, overlaps int, errs *[]string) Verdict {
	switch {
	case porc == porcupine.Illegal && overlaps > 0:
		return Invalid
	case porc == porcupine.Ok && overlaps == 0:
		return Valid
	case porc == porcupine.Unknown && overlaps > 0:
		return Invalid
	case porc == porcupine.Unknown:
		return Unknown
	case porc == porcupine.Ok:
		*errs = append(*errs, fmt.Sprintf("checker disagreement: porcupine linearized every hold but the interval sweep found %d overlaps", overlaps))
		return Unknown
	default:
		*errs = append(*errs, "checker disagreement: porcupine found the holds not linearizable but the interval sweep found no overlap")
		return Unknown
	}
}

// combine is the run's verdict from the lock's and the data's: invalid if either is, else unknown
// if either is.
func combine(a, b Verdict) Verdict {
	switch {
	case a == Invalid || b == Invalid:
		return Invalid
	case a == Unknown || b == Unknown:
		return Unknown
	}
	return Valid
}
