// Package checker decides whether a lock kept mutual exclusion in a recorded history.
//
// Check is a pipeline of named steps: validate the history's own assumptions, build holds from it,
// check them with porcupine under a mutex model, find every overlapping pair with an interval sweep
// and explain it, combine the two into a verdict, report overruns, compute statistics and fault
// windows, check the protected data, weigh the evidence that the lock was exercised at all, and keep
// what the visualization needs. Porcupine and the sweep are independent analyses of the same holds;
// if they ever disagree the verdict is unknown and the disagreement is reported as a checker error.
// A valid verdict needs evidence (see Evidence); without it the verdict is unknown, with the reason.
package checker

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// Options tune Check; the zero value gives working defaults.
type Options struct {
	// Timeout bounds porcupine's search over all segments (default 60s; negative means no limit).
	// Lock segments it leaves undecided are decided by the interval sweep alone; counter segments
	// (which have no sweep) leave the data-level verdict unknown. The visualization pass gets the
	// time left, and at least a tenth of Timeout, on top.
	Timeout time.Duration
	// MaxViolations caps how many violations and overruns are listed (default 1000); all are counted.
	MaxViolations int
	// MaxVisualizedOps is the number of porcupine operations above which the visualization shows
	// only segments that failed or contain a violation (default 20000).
	MaxVisualizedOps int
	// Observe, when set, is called with every event of the history in the order the checker reads
	// it, so a caller builds what it draws (the run's report) from the same pass over the history.
	// It must not keep e itself (the next event overwrites it); its fields it may keep.
	Observe func(e *history.Event)

	// alwaysPorcupine sends every segment to porcupine, even those it decides without (tests).
	alwaysPorcupine bool
	// foldEvery is how many holds a streamed check takes between looks for a fold (fold.go): 0 for
	// foldEvery, negative for never (tests).
	foldEvery int
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

// Check validates a history and returns the verdict with its evidence. It returns an error, and no
// verdict, only when the history breaks an assumption of the checker: a *ValidationError naming the
// line (event i is taken to be on line i+1; CheckLog knows the real lines).
func Check(events []history.Event, opts Options) (*Result, error) {
	return check(&history.Log{Events: events}, opts, true)
}

// CheckLog is Check on a history read with history.ReadLogFile: its errors name the file's lines,
// and a last line cut short by a crash is noted in the result.
func CheckLog(l *history.Log, opts Options) (*Result, error) {
	return check(l, opts, true)
}

// CheckFile reads a history file and checks it as CheckLog does, with the same verdict, but one
// event at a time: it keeps the holds and the few events later steps look at again (see store),
// not the history, so its memory does not grow with the number of client operations. Errors name
// the file and the line.
func CheckFile(path string, opts Options) (*Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	r, err := CheckReader(f, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// CheckReader is CheckFile on a history being read from r.
func CheckReader(r io.Reader, opts Options) (*Result, error) {
	return CheckSource(history.NewScanner(r), opts)
}

// Source is a history read one event at a time: a history.Scanner on its file, or a
// history.TapReader on the recorder that writes it.
type Source interface {
	Scan() bool
	Event() *history.Event
	Line() int
	Err() error
	Truncated() int
}

// CheckSource is CheckFile on the history s reads.
func CheckSource(s Source, opts Options) (*Result, error) {
	r, _, err := checkSource(s, opts)
	return r, err
}

// checkSource is CheckSource, with what it folded (fold.go; nil for nothing).
func checkSource(s Source, opts Options) (*Result, *foldSums, error) {
	began := time.Now()
	st := streamStore()
	v, pr := newValidator(st), newParser(st)
	pr.foldStart(opts.withDefaults())
	for s.Scan() {
		if opts.Observe != nil {
			opts.Observe(s.Event())
		}
		st.push(s.Event(), s.Line())
		i := st.n - 1
		if err := v.event(i); err != nil {
			// A line that is not an event at all, further on, is what reading the whole file
			// first would report: report it all the same.
			for s.Scan() {
			}
			if s.Err() != nil {
				return nil, nil, s.Err()
			}
			return nil, nil, err
		}
		pr.event(i)
		st.settle()
		pr.maybeFold()
	}
	if s.Err() != nil {
		return nil, nil, s.Err()
	}
	p := pr.finish()
	return finish(st, v.run, p, s.Truncated(), opts, true, began), p.folded, nil
}

// check is CheckLog with quiet-point splitting optional, so tests can show splitting changes nothing.
func check(l *history.Log, opts Options, split bool) (*Result, error) {
	began := time.Now()
	if opts.Observe != nil {
		for i := range l.Events {
			opts.Observe(&l.Events[i])
		}
	}
	// Step 0: the history's own assumptions, before anything reads it.
	run, err := validate(l)
	if err != nil {
		return nil, err
	}
	// Step 1: holds.
	p := parse(l.Events)
	return finish(sliceStore(l), run, p, l.Truncated, opts, split, began), nil
}

// finish is every step after the first pass over the events (steps 0 and 1).
func finish(st *store, run runInfo, p *parsed, truncated int, opts Options, split bool, began time.Time) *Result {
	opts = opts.withDefaults()
	timeout := max(opts.Timeout, 0)
	r := &Result{
		Violations: []Violation{},
		Overruns:   []Overrun{},
		Notes:      append([]string{}, p.notes...),
		Errors:     []string{},
	}
	if truncated > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("the last line (line %d) was cut short, as a run killed mid-write leaves it, and was not read", truncated))
	}
	keys, byKey := keyOrder(p.holds)

	// Step 2: lock-level check with porcupine, one segment at a time.
	model := lockModel(p.holds)
	segs := segmentsOf(p.holds, keys, byKey, split)
	fs := p.folded
	r.Segments = len(segs) + fs.segCount()
	porcStart := time.Now()
	out := fs.found().withPorcupine(checkSegments(model, p.holds, segs, p.porcupineLeft(timeout), opts.alwaysPorcupine))
	r.Porcupine = porcupineWord(out.result)
	if out.timedOut > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("porcupine ran out of time (%s) on %d of %d segments; the interval sweep decided them alone", opts.Timeout, out.timedOut, r.Segments))
	}
	if out.tooLarge > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d segments had more than %d porcupine operations (acquires that queue hand the lock on with no gap to cut at); the interval sweep decided them alone", out.tooLarge, maxSegmentOps))
	}

	// Step 3: interval analysis and explanations.
	segOf := make([]int32, len(p.holds))
	for i := range segs {
		for _, id := range segs[i].holds {
			segOf[id] = int32(i)
		}
	}
	firstOverlap := fs.found().firstOverlap
	r.ViolationCount = fs.found().violations
	live := map[string][]listedPair{}
	for _, k := range keys {
		sweep(p.holds, byKey[k], func(pr pair) {
			r.ViolationCount++
			firstOverlap = min(firstOverlap, max(p.holds[pr.a].Start, p.holds[pr.b].Start))
			si := segmentOfPair(p.holds, segOf, pr)
			segs[si].violations++
			if len(live[k]) < opts.MaxViolations {
				live[k] = append(live[k], listedPair{pair: pair{pr.a + p.base, pr.b + p.base}, seg: si})
			}
		})
	}
	r.pairs = listed(fs.found().pairs, live, opts.MaxViolations)
	for _, lp := range r.pairs {
		r.Violations = append(r.Violations, explain(st, p, lp.pair))
	}

	// Step 4: the lock-level verdict.
	r.Valid, r.DecidedBy = decide(p.holds, segs, fs, out, r.ViolationCount, &r.Errors)

	// Step 5: overruns.
	r.findOverruns(p, opts.MaxViolations)

	// Step 6: statistics and fault windows.
	r.Stats = p.stats
	r.Stats.NearDeadline = nearDeadline(p.holds) + fs.nearDeadlines(p)
	r.Stats.LatencyOK = latency(&p.okLat)
	r.Stats.LatencyAll = latency(&p.allLat)
	if n := r.Stats.Acquires.Total(); n > 0 {
		r.Stats.AcquiresOKShare = float64(r.Stats.Acquires.OK) / float64(n)
	}
	evKeys := evidenceKeys(run, &r.Stats)
	availability(&r.Stats, p.holds, fs, evKeys, p.last, r.Stats.Duration)
	r.Faults = faultWindows(st, p)
	if r.Faults == nil {
		r.Faults = []FaultWindow{}
	}
	r.Stats.OKInFaults, r.Stats.OKOutsideFaults = faultSplit(p.holds, r.Faults)
	r.Stats.OKWhollyInFaults = whollyInFaults(p.holds, r.Faults)
	r.Stats.Regrants = fs.withRegrants(regrants(p.holds, r.Faults))
	if fs != nil {
		r.Stats.OKInFaults += fs.inFaults
		r.Stats.OKOutsideFaults += fs.outFaults
		r.Stats.OKWhollyInFaults += fs.whollyInFaults
	}
	r.Stats.Promised, r.Stats.Unbounded = promised(p.holds, fs)
	r.ClientExits = clientExits(st, p, opts.MaxViolations)

	// Step 6b: the lock's fencing tokens must only go up.
	var regressions int
	regressions, r.TokenRegressions = tokenRegressions(st, p, opts.MaxViolations)
	r.TokenRegressionCount = regressions
	if regressions > 0 && r.Valid == Valid {
		r.Valid = Invalid
	}

	// Step 6d: leases the lock dropped before their deadline, and renewals of ended leases.
	r.leaseFindings(p, opts.MaxViolations)
	r.LockValid = r.Valid

	// Step 6c: the data the lock protects (counter workload), and the run's verdict from both.
	r.Resource = checkResource(st, p.holds, r.Faults, opts)
	if r.Resource != nil && fs != nil && fs.resourceAfter {
		r.Resource.Errors = append(r.Resource.Errors, "the first read or write of the resource came after the check had folded holds away (the history has no run plan, or its plan says workload mutex), so the resource check did not see every hold: give the history a run plan (its first event) with workload counter")
		r.Resource.Valid = Unknown
	}
	if r.Resource != nil {
		r.Valid = combine(r.LockValid, r.Resource.Valid)
	}

	// Step 6e: liveness after the last heal; a deadlock makes the run invalid.
	r.Liveness = checkLiveness(st, run, p)
	if r.Liveness != nil && r.Liveness.Verdict == LiveDeadlock {
		r.Valid = combine(r.Valid, Invalid)
	}

	// Step 6f: operations that acted on another's lease, and the culprits of unexplained violations.
	r.nameCulprits(p, opts.MaxViolations)

	r.FirstFinding = firstFinding(r, firstOverlap)

	// Step 7: evidence. Valid needs evidence that the lock was exercised; invalid does not.
	r.weighEvidence(st, run, p, evKeys)

	// Step 8: what Visualize needs.
	budget := time.Duration(0)
	if timeout > 0 {
		budget = max(timeout-time.Since(porcStart), timeout/10)
	}
	r.prepareVisualization(p, segs, opts.MaxVisualizedOps, budget)

	r.CheckDuration = time.Since(began)
	return r
}

// findOverruns lists holds whose protected work ended after the lease's deadline (step 5). A lease
// that expired on arrival has no hold, but work under it is an overrun all the same.
func (r *Result) findOverruns(p *parsed, limit int) {
	if fs := p.folded; fs != nil {
		// Folded holds come first (smaller ids): those folded, and those still pinned, whose
		// work could end late until the end.
		os := slices.Clone(fs.overruns)
		n := fs.overrunN
		for id, h := range p.pinned {
			if h.WorkEnd != 0 && h.Deadline != Never && h.WorkEnd > h.Deadline {
				os = append(os, foldedOverrun{id: id, o: overrunOf(h)})
				n++
			}
		}
		slices.SortFunc(os, func(a, b foldedOverrun) int { return cmp.Compare(a.id, b.id) })
		r.OverrunCount += n
		for _, o := range os[:min(len(os), limit)] {
			r.Overruns = append(r.Overruns, o.o)
		}
	}
	holds := p.holds
	for i := range holds {
		h := &holds[i]
		if h.WorkEnd == 0 || h.Deadline == Never || h.WorkEnd <= h.Deadline {
			continue
		}
		r.OverrunCount++
		if len(r.Overruns) < limit {
			r.Overruns = append(r.Overruns, overrunOf(h))
		}
	}
}

// overrunOf is the overrun of h, whose work ended past its deadline.
func overrunOf(h *hold) Overrun {
	o := Overrun{Key: h.key, Process: h.Process, Value: h.Value, Deadline: h.Deadline, WorkEnd: h.WorkEnd, Past: h.WorkEnd - h.Deadline}
	o.Description = fmt.Sprintf("key %s: p%d worked until %s, %s past its deadline %s", o.Key, o.Process, FormatTime(o.WorkEnd), FormatSpan(o.Past), FormatTime(o.Deadline))
	return o
}

// weighEvidence gathers the evidence (step 7): a valid verdict without enough of it becomes unknown,
// and an unknown verdict gets the sentence that says why.
func (r *Result) weighEvidence(st *store, run runInfo, p *parsed, keys []string) {
	var lacking string
	r.Evidence, lacking = gatherEvidence(st, run, p, keys)
	if st.n > 0 {
		r.Evidence.Edges = edgesOf(run, p, &r.Stats, r.Evidence.Nemeses)
	}
	if !r.Evidence.HasPlan && st.n > 0 {
		r.Notes = append(r.Notes, "the history has no run plan (a hand-made history?), so whether the planned faults were applied and the planned time ran cannot be judged")
	}
	if r.Valid == Valid && !r.Evidence.Enough {
		r.Valid = Unknown
	}
	if r.Valid == Unknown {
		r.UnknownReason = lacking
		if r.Evidence.Enough {
			r.UnknownReason = r.analysisUnknown()
		}
	}
}

// analysisUnknown says why an analysis, rather than the evidence, left the verdict unknown.
func (r *Result) analysisUnknown() string {
	switch {
	case len(r.Errors) > 0:
		return "the checker's own analyses disagreed (see the checker errors): that is a bug in lockpick; please report it with the history"
	case r.Resource != nil && len(r.Resource.Errors) > 0:
		return "the counter history could not be checked: " + oneLine(r.Resource.Errors[0])
	case r.Resource != nil && r.Resource.Valid == Unknown:
		return "porcupine could not decide the counter model in time: raise --check-timeout (lockpick check --timeout)"
	}
	return "the checker could not decide"
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
