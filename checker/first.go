package checker

import (
	"fmt"
	"slices"
	"sort"
)

// Finding kinds, as FirstFinding names them.
const (
	FindingViolation       = "violation"
	FindingTokenRegression = "token-regression"
	FindingEarlyLoss       = "early-loss"
	FindingLateExtend      = "late-extend"
	FindingStaleWrite      = "stale-write"
	FindingDeadlock        = "deadlock"
)

// FirstFinding is the earliest evidence against the lock in a run: what a "time to the first
// violation" figure measures. Only findings that make a run invalid count (an overrun does not).
type FirstFinding struct {
	// Kind is one of the Finding constants.
	Kind string `json:"kind"`
	// At is when it happened, on the run clock: an overlap's start, a regressed grant, a refused
	// release, a stale write's invoke, the start of a deadlock.
	At int64 `json:"at"`
	// Description is the finding in one line, as the summary lists it.
	Description string `json:"description"`
}

// firstFinding picks the earliest of the findings r lists; firstOverlap is the earliest overlap of
// all (the listed violations may be a capped subset). Nil when the run found nothing.
func firstFinding(r *Result, firstOverlap int64) *FirstFinding {
	var best *FirstFinding
	consider := func(kind string, at int64, desc string) {
		if best == nil || at < best.At {
			best = &FirstFinding{Kind: kind, At: at, Description: desc}
		}
	}
	if r.ViolationCount > 0 {
		// The earliest listed overlap describes it; the time is the earliest of all.
		desc, first := "", int64(Never)
		for _, v := range r.Violations {
			if v.OverlapStart < first {
				desc, first = v.Description, v.OverlapStart
			}
		}
		consider(FindingViolation, firstOverlap, desc)
	}
	for _, t := range r.TokenRegressions {
		consider(FindingTokenRegression, t.Later.Start, t.Description)
	}
	for _, e := range r.EarlyLosses {
		consider(FindingEarlyLoss, e.Completed, e.Description)
	}
	if res := r.Resource; res != nil {
		for _, s := range res.StaleWrites {
			consider(FindingStaleWrite, s.Invoke, s.Description)
		}
		if s := res.Illegal; s != nil && res.Valid == Invalid {
			kind, what := FindingData, "no order of its reads and writes explains it"
			if res.LostUpdates > 0 {
				kind, what = FindingLostUpdate, fmt.Sprintf("an accepted increment was overwritten (%s in the run)", Phrase(FindingLostUpdate, int(res.LostUpdates)))
			}
			consider(kind, s.Until, fmt.Sprintf("key %s: the counter went wrong between %s and %s: %s", s.Key, FormatTime(s.From), FormatTime(s.Until), what))
		}
	}
	if r.Liveness != nil && r.Liveness.Verdict == LiveDeadlock {
		for _, f := range r.Liveness.Findings {
			if f.Kind == LiveDeadlock {
				consider(FindingDeadlock, f.From, f.Description)
			}
		}
	}
	return best
}

// Regrant is how soon the lock was granted again after a fault took effect: the figure "time from
// a leader kill to the next grant".
type Regrant struct {
	Fault string   `json:"fault"`
	Nodes []string `json:"nodes,omitempty"`
	// Applied is when the fault took effect; Grant when the first acquire invoked after it completed
	// ok (-1: none did before the run ended); Gap is Grant - Applied.
	Applied int64 `json:"applied"`
	Grant   int64 `json:"grant"`
	Gap     int64 `json:"gap"`
}

// regrants measures, for every fault window, the time to the first grant of an acquire invoked
// after the fault took effect. An acquire invoked before cannot tell: the old leader may have
// answered it.
func regrants(holds []hold, wins []FaultWindow) []Regrant {
	if len(wins) == 0 {
		return []Regrant{} // no window to find the first grant after: no list of every grant
	}
	type grant struct{ invoke, start int64 }
	var gs []grant
	for i := range holds {
		if !holds[i].dead {
			gs = append(gs, grant{holds[i].Invoke, holds[i].Start})
		}
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].invoke < gs[j].invoke })
	// earliest[i] is the earliest grant among the acquires invoked at or after gs[i].invoke.
	earliest := make([]int64, len(gs))
	for i := len(gs) - 1; i >= 0; i-- {
		earliest[i] = gs[i].start
		if i+1 < len(gs) {
			earliest[i] = min(earliest[i], earliest[i+1])
		}
	}
	out := make([]Regrant, 0, len(wins))
	for _, w := range wins {
		rg := Regrant{Fault: w.Fault, Nodes: slices.Clone(w.Nodes), Applied: w.Applied, Grant: -1, Gap: -1}
		i := sort.Search(len(gs), func(i int) bool { return gs[i].invoke >= w.Applied })
		if i < len(gs) {
			rg.Grant = earliest[i]
			rg.Gap = rg.Grant - w.Applied
		}
		out = append(out, rg)
	}
	return out
}

// promised is the validity each hold was promised at its grant, and how many holds had no deadline.
func promised(holds []hold, fs *foldSums) (Latency, int) {
	var ns latencies
	unbounded := 0
	if fs != nil {
		ns, unbounded = fs.promised, fs.unbounded // the end's last use of them
	}
	for i := range holds {
		h := &holds[i]
		switch {
		case h.dead:
		case h.granted == Never:
			unbounded++
		case h.Validity > 0:
			ns.add(h.Validity)
		default:
			ns.add(h.granted - h.Start)
		}
	}
	return latency(&ns), unbounded
}
