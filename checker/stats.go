package checker

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	ddstore "github.com/DataDog/sketches-go/ddsketch/store"

	"github.com/lockpick-dev/lockpick/history"
)

// faultWindows builds one window per nemesis fault operation (step 6). A window opens at the fault's
// invoke (the fault may take effect any time after) and closes at the completion of the heal of the
// last of its nodes (only then is it certainly over), or at the end of the history.
//
// A heal matches a window when it names the same Fault (an empty Fault matches any) and either names
// no nodes (it heals everything) or names the node. A fault that names no nodes is healed by any heal
// of its Fault. A fault or heal that failed certainly did not happen and is ignored; one that ended
// with info, or never completed, is taken to have happened.
func faultWindows(st *store, p *parsed) []FaultWindow {
	type target struct {
		win    int
		node   string
		healed bool
		at     int64
		lifted int64
	}
	var wins []FaultWindow
	var targets []target
	for _, op := range p.nemOps {
		inv := st.at(op.inv)
		var comp *history.Event
		if op.comp >= 0 {
			comp = st.at(op.comp)
			if comp.Type == history.Fail {
				continue
			}
		}
		fo, _ := op.read(st)
		fault, effect, f := fo.Fault, fo.Effect, fo.F
		nodes := slices.Clone(fo.Nodes)
		if fault == "" {
			fault = f
		}
		switch effect {
		case history.EffectFault:
			w := len(wins)
			applied := inv.Time
			if comp != nil {
				applied = comp.Time
			}
			wins = append(wins, FaultWindow{Fault: fault, F: f, Nodes: nodes, Start: inv.Time, End: p.last, Applied: applied})
			if len(nodes) == 0 {
				targets = append(targets, target{win: w})
			}
			for _, n := range nodes {
				targets = append(targets, target{win: w, node: n})
			}
		case history.EffectHeal:
			if comp == nil {
				continue // a heal that never completed may not have happened
			}
			for i := range targets {
				t := &targets[i]
				if t.healed || (inv.Fault != "" || comp.Fault != "") && wins[t.win].Fault != fault {
					continue
				}
				if len(nodes) == 0 || t.node == "" || slices.Contains(nodes, t.node) {
					t.healed, t.at, t.lifted = true, comp.Time, inv.Time
				}
			}
		}
	}
	// A window ends when its last node is healed; an unhealed node keeps it open to the end.
	healed := make([]bool, len(wins))
	end := make([]int64, len(wins))
	lifted := make([]int64, len(wins))
	for i := range wins {
		healed[i] = true
	}
	for _, t := range targets {
		if !t.healed {
			healed[t.win] = false
		} else {
			end[t.win] = max(end[t.win], t.at)
			lifted[t.win] = max(lifted[t.win], t.lifted)
		}
	}
	for i := range wins {
		wins[i].Healed = healed[i]
		wins[i].Lifted = p.last
		if healed[i] {
			wins[i].End = end[i]
			// Some of the fault lasts until its last heal begins.
			wins[i].Lifted = max(wins[i].Applied, lifted[i])
		}
		wins[i].Description = wins[i].describe()
	}
	return wins
}

// whollyInFaults counts ok acquires whose invoke and completion both fell while one fault was
// certainly in effect: some window applied at or before the invoke and lifted at or after the
// completion. Windows sorted by when they were applied, with the latest lift among each prefix,
// make that one binary search per acquire (holds times windows was 1.7 s at 10M operations).
func whollyInFaults(holds []hold, wins []FaultWindow) int {
	type win struct{ applied, lifted int64 }
	ws := make([]win, len(wins))
	for i, w := range wins {
		ws[i] = win{w.Applied, w.Lifted}
	}
	slices.SortFunc(ws, func(a, b win) int { return cmp.Compare(a.applied, b.applied) })
	for i := 1; i < len(ws); i++ {
		ws[i].lifted = max(ws[i].lifted, ws[i-1].lifted) // the latest lift of any window up to i
	}
	n := 0
	for i := range holds {
		h := &holds[i]
		// The windows applied at or before the invoke are ws[:k].
		k := sort.Search(len(ws), func(j int) bool { return ws[j].applied > h.Invoke })
		if k > 0 && ws[k-1].lifted >= h.Start {
			n++
		}
	}
	return n
}

// faultSplit counts ok acquires that completed inside any fault window and outside all of them.
func faultSplit(holds []hold, wins []FaultWindow) (in, out int) {
	// Merge the windows into disjoint intervals so each acquire is one binary search.
	type iv struct{ s, e int64 }
	ivs := make([]iv, 0, len(wins))
	for _, w := range wins {
		ivs = append(ivs, iv{w.Start, w.End})
	}
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].s < ivs[j].s })
	var merged []iv
	for _, x := range ivs {
		if n := len(merged); n > 0 && x.s <= merged[n-1].e {
			merged[n-1].e = max(merged[n-1].e, x.e)
			continue
		}
		merged = append(merged, x)
	}
	for i := range holds {
		t := holds[i].Start
		k := sort.Search(len(merged), func(k int) bool { return merged[k].e >= t })
		if k < len(merged) && merged[k].s <= t {
			in++
		} else {
			out++
		}
	}
	return in, out
}

// latencies are acquire latencies in nanoseconds, one per acquire, kept exactly for the first
// exactLatencies acquires in half the memory of an []int64: those from 0 to 4.29 s, nearly all, in
// 32 bits, the rest (and any negative one) in 64. Past that they move into a DDSketch (1% relative
// error, the one the report's quantile lines use), so a 10-minute run at the ceiling (17 million
// acquires) keeps a few KiB rather than 68 MiB; the count and the maximum stay exact.
type latencies struct {
	short  []uint32
	long   []int64
	sketch *ddsketch.DDSketch // nil while exact
	n      int
	max    int64
}

// exactLatencies is how many acquires' latencies are kept for exact percentiles (8 MiB of them at
// most, for each of the two lists).
const exactLatencies = 1 << 21

// latencySketchAccuracy is the sketch's relative error past exactLatencies.
const latencySketchAccuracy = 0.01

func (l *latencies) add(ns int64) {
	if l.n == 0 || ns > l.max {
		l.max = ns
	}
	l.n++
	switch {
	case l.sketch != nil:
		l.sketch.Add(float64(ns)) //nolint:errcheck // only NaN and infinities fail
	case ns >= 0 && ns <= math.MaxUint32:
		l.short = append(l.short, uint32(ns))
	default:
		l.long = append(l.long, ns)
	}
	if l.sketch == nil && l.n > exactLatencies {
		l.toSketch()
	}
}

// toSketch moves the exact latencies into a sketch and drops them.
func (l *latencies) toSketch() {
	m, err := mapping.NewCubicallyInterpolatedMapping(latencySketchAccuracy)
	if err != nil {
		panic(err) // only for an accuracy outside (0, 1)
	}
	l.sketch = ddsketch.NewDDSketchFromStoreProvider(m, ddstore.DenseStoreConstructor)
	for _, ns := range l.short {
		l.sketch.Add(float64(ns)) //nolint:errcheck // finite
	}
	for _, ns := range l.long {
		l.sketch.Add(float64(ns)) //nolint:errcheck // finite
	}
	l.short, l.long = nil, nil
}

// latency returns the latencies' nearest-rank percentiles in milliseconds: exact while at most
// exactLatencies were added, past that within the sketch's 1% of the exact ones (the count and the
// maximum exact). It reorders the exact ones in place: it selects the four ranks it needs rather
// than sorting (15 million acquires sorted took a second of the end of a 10-minute run).
func latency(l *latencies) Latency {
	n := l.n
	if n == 0 {
		return Latency{}
	}
	rank := func(q float64) int { return max(0, min(int(math.Ceil(q*float64(n)))-1, n-1)) } // nearest rank
	nth := l.exactRank()
	if l.sketch != nil {
		nth = l.sketchRank
	}
	ms := func(i int) float64 { return float64(nth(i)) / 1e6 }
	return Latency{Count: n, P50: ms(rank(0.50)), P90: ms(rank(0.90)), P99: ms(rank(0.99)), Max: float64(l.max) / 1e6}
}

// sketchRank is the sketch's value at rank i (0-based, increasing): the sketch counts rank r as
// reached once more than r values are below, so asking for r+0.5 lands on r's own bucket.
func (l *latencies) sketchRank(i int) int64 {
	q := 1.0
	if l.n > 1 {
		q = min(1, (float64(i)+0.5)/float64(l.n-1))
	}
	v, err := l.sketch.GetValueAtQuantile(q)
	if err != nil {
		return 0 // only for an empty sketch, which latency never asks
	}
	return int64(math.Round(v))
}

// exactRank returns nth: the latency of rank i (increasing) in the whole: the negative long ones,
// the short ones, then the rest of the long ones. Ranks must be asked in increasing order.
func (l *latencies) exactRank() func(i int) int64 {
	slices.Sort(l.long)                      // few
	neg, _ := slices.BinarySearch(l.long, 0) // the long ones below every short one
	from := 0                                // the short ones below from are in their sorted places
	return func(i int) int64 {
		switch {
		case i < neg:
			return l.long[i]
		case i < neg+len(l.short):
			k := i - neg
			selectRank(l.short[from:], k-from)
			from = k
			return int64(l.short[k])
		default:
			return l.long[i-len(l.short)]
		}
	}
}

// selectRank reorders xs so that xs[k] is the value a sort would put there, every value before it
// no greater and every value after it no smaller (Hoare's selection; the pivot is the median of
// three, and a range that shrinks too slowly is sorted instead).
func selectRank(xs []uint32, k int) {
	lo, hi := 0, len(xs)-1
	for budget := 64; hi > lo; budget-- {
		if budget == 0 || hi-lo < 16 {
			slices.Sort(xs[lo : hi+1])
			return
		}
		mid := lo + (hi-lo)/2
		p := median3(xs[lo], xs[mid], xs[hi])
		i, j := lo, hi
		for i <= j {
			for xs[i] < p {
				i++
			}
			for xs[j] > p {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		// Now xs[lo..j] <= p, xs[i..hi] >= p, and anything between equals p.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}

func median3(a, b, c uint32) uint32 {
	if a > b {
		a, b = b, a
	}
	if b > c {
		b = c
	}
	return max(a, b)
}

// addAcquire counts the completion e of an acquire, telling a refusal because the lock was held
// from a failure.
func (c *Counts) addAcquire(e *history.Event) {
	c.add(e.Type)
	if e.Type == history.Fail && e.Reason == history.ReasonHeld {
		c.Held++
	}
}

// availability fills the availability figures users ask about (step 6): how much of the time the
// lock was held, how often it was granted, and how often asking for it went wrong. keys are the
// keys the run was to exercise, span the length of the history.
func availability(s *Stats, holds []hold, fs *foldSums, keys []string, end, span int64) {
	a := s.Acquires
	if done := a.OK + a.Fail + a.Info; done > 0 {
		s.ErrorShare = float64(a.Fail-a.Held+a.Info) / float64(done)
	}
	if span <= 0 || len(keys) == 0 {
		return
	}
	s.GrantsPerSecond = float64(s.Holds) / (float64(span) / 1e9)
	byKey := map[string][][2]int64{}
	for i := range holds {
		if h := &holds[i]; !h.dead {
			byKey[h.key] = append(byKey[h.key], [2]int64{h.Start, min(h.End, end)})
		}
	}
	var sum float64
	for _, k := range keys {
		held := unionLength(byKey[k])
		if fs != nil {
			held += fs.held[k] // folded holds all ended before the others began
		}
		sum += float64(held) / float64(span)
	}
	s.HeldShare = sum / float64(len(keys))
}

// unionLength is the length of the union of intervals (sorted in place).
func unionLength(ivs [][2]int64) int64 {
	slices.SortFunc(ivs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var total int64
	var lo, hi int64
	for i, iv := range ivs {
		switch {
		case i == 0:
			lo, hi = iv[0], iv[1]
		case iv[0] > hi:
			total += hi - lo
			lo, hi = iv[0], iv[1]
		default:
			hi = max(hi, iv[1])
		}
	}
	if len(ivs) > 0 {
		total += hi - lo
	}
	return total
}
