package checker

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// opInput is the input of a porcupine operation: the acquire or the release of one hold. A
// synthetic one stands for a hold carried across a segment boundary (see segmentsOf).
type opInput struct {
	hold      int32
	release   bool
	synthetic bool
}

// free is the model state of a lock nobody holds; otherwise the state is the holder's hold id.
const free int32 = -1

// lockModel is a mutex whose state is its holder (step 2). An acquire is legal only when the lock is
// free and makes its hold the holder; a release is legal only for the current holder and frees it.
func lockModel(holds []hold) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return free },
		Step: func(state, input, _ any) (bool, any) {
			s, in := state.(int32), input.(opInput)
			if in.release {
				if s == in.hold {
					return true, free
				}
				return false, s
			}
			if s == free {
				return true, in.hold
			}
			return false, s
		},
		Hash: func(state any) uint64 { return uint64(int64(state.(int32)) + 1) },
		DescribeOperation: func(input, _ any) string {
			in := input.(opInput)
			h := &holds[in.hold]
			switch {
			case in.release && in.synthetic:
				return fmt.Sprintf("release p%d (segment cut: p%d holds on into the next segment)", h.Process, h.Process)
			case in.release:
				return fmt.Sprintf("release p%d (end=%s)", h.Process, h.EndedBy)
			case in.synthetic:
				return fmt.Sprintf("acquire p%d %s v=%s (held since %s, carried in from the previous segment)", h.Process, h.key, h.Value, FormatTime(h.Start))
			}
			return fmt.Sprintf("acquire p%d %s v=%s → ok (deadline %s)", h.Process, h.key, h.Value, FormatTime(h.Deadline))
		},
		DescribeState: func(state any) string {
			s := state.(int32)
			if s == free {
				return "free"
			}
			h := &holds[s]
			return fmt.Sprintf("held by p%d (%s)", h.Process, h.Value)
		},
	}
}

// segment is a run of one key's holds that porcupine can check on its own. A run at the ceiling
// has about one per hold, so it is kept in 56 bytes: its key is its holds', its result a byte.
type segment struct {
	holds []int32 // the holds whose acquire was invoked in this segment, by invoke time
	// carry is the hold that certainly holds the lock when the segment begins at in (free if none);
	// cut is the one that certainly holds it when the segment ends at out.
	carry, cut int32
	in, out    int64
	violations int32
	result     segResult
}

// segResult is porcupine's CheckResult as a byte; the zero value is porcupine.Unknown.
type segResult uint8

const (
	segUnknown segResult = iota
	segOk
	segIllegal
)

func resultOf(r porcupine.CheckResult) segResult {
	switch r {
	case porcupine.Ok:
		return segOk
	case porcupine.Illegal:
		return segIllegal
	}
	return segUnknown
}

func (r segResult) check() porcupine.CheckResult {
	return [...]porcupine.CheckResult{porcupine.Unknown, porcupine.Ok, porcupine.Illegal}[r]
}

// key is the key of the segment's holds (every segment has a hold or a carried one).
func (s *segment) key(holds []hold) string {
	if len(s.holds) > 0 {
		return holds[s.holds[0]].key
	}
	return holds[s.carry].key
}

func (s *segment) ops() int {
	n := 2 * len(s.holds)
	if s.carry != free {
		n += 2
	}
	return n
}

// maxSegmentOps bounds the segments given to porcupine. Its search keeps a bitset of the whole
// partition per cached state, so memory grows with the square of a partition's length (about
// n²/8 bytes: 128 MiB at this bound). A longer segment (queued acquires that hand the lock on with no
// gap are never cut) is left to the interval sweep, which is exact too, and decides it alone.
const maxSegmentOps = 1 << 15

// segmentsOf splits each key's holds into segments at cut points, or returns one segment per key
// when split is false. Without cuts, porcupine's cost grows with the square of a key's history; with
// them, a valid contended history becomes segments of a hold or two.
//
// A cut is a time t, between two consecutive acquire invokes, that no acquire interval [invoke,
// completion] of an ok acquire contains and that at most one hold window [start, end] contains,
// strictly inside. Every hold then lies wholly on one side of t except that one, whose acquire is
// before t and whose release is after. So in every linearization the state at t is the same: free
// (a quiet point) or held by that hold; every operation before t is linearized before every
// operation after t. Cutting the key's history there, ending the left part with a release of that
// hold at t and starting the right part with an acquire of it at t, gives parts that are each
// linearizable iff the whole is: restrict a whole linearization to each side (the state at t
// matches), or concatenate the parts' linearizations (each part reaches the state at t that the
// next part starts from). Checking the segments independently is therefore exact. Touching
// intervals are never cut: at an equal time porcupine treats operations as concurrent.
func segmentsOf(holds []hold, keys []string, byKey map[string][]int32, split bool) []segment {
	sorted := make(map[string][]int32, len(keys))
	n := 0
	for _, k := range keys {
		ids := append([]int32(nil), byKey[k]...)
		sort.Slice(ids, func(i, j int) bool {
			a, b := &holds[ids[i]], &holds[ids[j]]
			if a.Invoke != b.Invoke {
				return a.Invoke < b.Invoke
			}
			return ids[i] < ids[j]
		})
		sorted[k] = ids
		n += cutsOf(holds, ids, split, func(int, int32, int64) {}) + 1
	}
	// Counted first, so the list is made once: a run at the ceiling has about one per hold, and
	// growing it by append allocated three times what it keeps.
	segs := make([]segment, 0, n)
	for _, k := range keys {
		ids := sorted[k]
		begin, carry, in := 0, free, int64(0)
		cutsOf(holds, ids, split, func(i int, cut int32, at int64) {
			segs = append(segs, segment{holds: ids[begin:i], carry: carry, in: in, cut: cut, out: at})
			begin, carry, in = i, cut, at
		})
		if begin < len(ids) || carry != free {
			segs = append(segs, segment{holds: ids[begin:], carry: carry, in: in, cut: free})
		}
	}
	return segs
}

// cutsOf calls at(i, cut, t) for each cut point of a key's holds ids (sorted by invoke) before the
// hold ids[i]: cut is the hold that holds the lock there (free at a quiet point), t the instant.
// It returns how many there were; none unless split.
func cutsOf(holds []hold, ids []int32, split bool, at func(i int, cut int32, t int64)) int {
	// Over the holds before the current one: the latest acquire completion, the latest end
	// (and whose), and the second latest end.
	var lastStart, end1, end2 int64 = 0, math.MinInt64, math.MinInt64
	held, cuts := free, 0
	for i, id := range ids {
		h := &holds[id]
		if split && i > 0 {
			cut, t := free, int64(0)
			ok := end1 < h.Invoke // quiet point: every earlier hold is over
			if !ok {
				// Held point: t in (lo, hi) is covered only by the hold with the latest end.
				lo, hi := max(lastStart, end2), min(h.Invoke, end1)
				if hi-lo >= 2 {
					ok, cut, t = true, held, lo+1
				}
			}
			if ok {
				at(i, cut, t)
				cuts++
			}
		}
		if i == 0 || h.Start > lastStart {
			lastStart = h.Start
		}
		switch {
		case h.End > end1:
			end2, end1, held = end1, h.End, id
		case h.End > end2:
			end2 = h.End
		}
	}
	return cuts
}

// segmentOps turns a segment into porcupine operations: an acquire spans [invoke, completion], a
// release is the instant its hold ended; a hold carried across a cut is acquired or released at the
// cut instead.
func segmentOps(holds []hold, seg *segment, ops []porcupine.Operation) []porcupine.Operation {
	release := func(id int32) porcupine.Operation {
		h := &holds[id]
		if id == seg.cut {
			return porcupine.Operation{ClientId: h.Process, Input: opInput{hold: id, release: true, synthetic: true}, Call: seg.out, Return: seg.out}
		}
		return porcupine.Operation{ClientId: h.Process, Input: opInput{hold: id, release: true}, Call: h.End, Return: h.End}
	}
	if seg.carry != free {
		h := &holds[seg.carry]
		ops = append(ops,
			porcupine.Operation{ClientId: h.Process, Input: opInput{hold: seg.carry, synthetic: true}, Call: seg.in, Return: seg.in},
			release(seg.carry))
	}
	for _, id := range seg.holds {
		h := &holds[id]
		ops = append(ops,
			porcupine.Operation{ClientId: h.Process, Input: opInput{hold: id}, Call: h.Invoke, Return: h.Start},
			release(id))
	}
	return ops
}

// segmentOfPair is the segment where an overlapping pair shows: that of the later-invoked hold. The
// earlier one is either in the same segment or, since it is then the only hold in effect at every
// cut in between, carried into it.
func segmentOfPair(holds []hold, segOf []int32, pr pair) int32 {
	a, b := &holds[pr.a], &holds[pr.b]
	if a.Invoke > b.Invoke || a.Invoke == b.Invoke && pr.a > pr.b {
		return segOf[pr.a]
	}
	return segOf[pr.b]
}

// porcupineOutcome is porcupine's verdict over all segments.
type porcupineOutcome struct {
	result   porcupine.CheckResult
	timedOut int // segments not decided in time
	tooLarge int // segments over maxSegmentOps
}

// checkSegments runs porcupine on every segment with a few workers, so a history of a million holds
// does not start a million goroutines at once. timeout bounds the whole step; 0 means no limit.
// A segment whose holds follow one another (see sequential) gets the answer porcupine would give
// without calling it, unless alwaysPorcupine is set (the property test compares the two).
func checkSegments(model porcupine.Model, holds []hold, segs []segment, timeout time.Duration, alwaysPorcupine bool) porcupineOutcome {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	var next atomic.Int64
	var timedOut, tooLarge atomic.Int64
	workers := min(runtime.GOMAXPROCS(0), len(segs))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ops []porcupine.Operation
			var spans []span3
			for {
				i := int(next.Add(1) - 1)
				if i >= len(segs) {
					return
				}
				seg := &segs[i]
				if seg.ops() > maxSegmentOps {
					seg.result = segUnknown
					tooLarge.Add(1)
					continue
				}
				var left time.Duration
				if timeout > 0 {
					if left = time.Until(deadline); left <= 0 {
						seg.result = segUnknown
						timedOut.Add(1)
						continue
					}
				}
				// After the checks above, so that every result is the one porcupine would give.
				if !alwaysPorcupine {
					var ok bool
					if spans, ok = sequential(holds, seg, spans[:0]); ok {
						seg.result = segOk
						continue
					}
				}
				ops = segmentOps(holds, seg, ops[:0])
				seg.result = resultOf(porcupine.CheckOperationsTimeout(model, ops, left))
				if seg.result == segUnknown {
					timedOut.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	out := porcupineOutcome{result: porcupine.Ok, timedOut: int(timedOut.Load()), tooLarge: int(tooLarge.Load())}
	for i := range segs {
		switch segs[i].result.check() {
		case porcupine.Illegal:
			out.result = porcupine.Illegal
		case porcupine.Unknown:
			if out.result == porcupine.Ok {
				out.result = porcupine.Unknown
			}
		}
	}
	return out
}

// decide is the lock-level verdict (step 4): the sweep's overlaps, cross-checked against porcupine
// on every segment porcupine decided. The sweep is exact for the mutex model (see overlaps), so a
// segment porcupine could not decide, too long for it or out of time, is decided by the sweep alone,
// and decidedBy says so. A segment on which the two disagree is a bug in lockpick, not a finding: the
// verdict is then unknown and errs says where.
func decide(holds []hold, segs []segment, fs *foldSums, out porcupineOutcome, overlaps int, errs *[]string) (v Verdict, decidedBy string) {
	v = Valid
	if overlaps > 0 {
		v = Invalid
	}
	left := fs.found().left
	var found []disagreement
	for i := range segs {
		s := &segs[i]
		if s.result == segUnknown {
			left++
			continue
		}
		if (s.result == segIllegal) != (s.violations > 0) {
			found = append(found, disagreement{key: s.key(holds), index: fs.wholeIndex(i, s.key(holds)), result: s.result, violations: s.violations})
		}
	}
	found = append(found, fs.disagreements(holds, segs)...)
	slices.SortFunc(found, func(a, b disagreement) int { return cmp.Compare(a.index, b.index) })
	for _, d := range found {
		v = Unknown
		*errs = append(*errs, fmt.Sprintf("checker disagreement on key %q, segment %d: porcupine says %s but the sweep found %d overlaps",
			d.key, d.index, porcupineWord(d.result.check()), d.violations))
	}
	var why []string
	if out.tooLarge > 0 {
		why = append(why, fmt.Sprintf("%d %s too long for porcupine", out.tooLarge, plural(out.tooLarge, "segment")))
	}
	if out.timedOut > 0 {
		why = append(why, fmt.Sprintf("%d %s porcupine had no time left for", out.timedOut, plural(out.timedOut, "segment")))
	}
	total := len(segs) + fs.segCount()
	switch {
	case total == 0:
		decidedBy = "nothing to decide (no holds)"
	case left == 0:
		decidedBy = "porcupine+sweep"
	case left == total:
		decidedBy = fmt.Sprintf("sweep (%s)", strings.Join(why, ", "))
	default:
		decidedBy = fmt.Sprintf("porcupine+sweep, the sweep alone on %d of %d segments (%s)", left, total, strings.Join(why, ", "))
	}
	return v, decidedBy
}

// disagreement is a segment on which porcupine and the sweep disagree; index is its place among
// every segment, key by key.
type disagreement struct {
	key        string
	index      int
	result     segResult
	violations int32
}

// porcupineWord is the lower-case word results.json uses for a porcupine verdict.
func porcupineWord(r porcupine.CheckResult) string {
	switch r {
	case porcupine.Ok:
		return "ok"
	case porcupine.Illegal:
		return "illegal"
	default:
		return "unknown"
	}
}

// plural is word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// span3 is a hold as porcupine sees it in a segment: its acquire is called at call and returns at
// start, its release is the instant end.
type span3 struct{ call, start, end int64 }

// sequential reports whether a segment's holds follow one another: ordered by start, each hold's
// release is at or before the next hold's start (and its own start is within [call, end]). Most
// segments of a history are one hold, or a hold and the acquire that waited for it.
//
// Such a segment is linearizable, so porcupine would answer ok: linearize, in that order, each
// acquire at max(call, previous end) and each release at its end. Those points are within each
// operation's interval and never go back, and the sequence is acquire, release, acquire, release of
// matching holds, which the mutex model accepts. (Porcupine orders calls before returns at equal
// times, so an acquire returning at the instant the previous release happens may follow it.)
// Anything else, including every segment with an overlap, goes to porcupine.
func sequential(holds []hold, seg *segment, spans []span3) ([]span3, bool) {
	end := func(id int32) int64 {
		if id == seg.cut {
			return seg.out
		}
		return holds[id].End
	}
	if seg.carry != free {
		spans = append(spans, span3{seg.in, seg.in, end(seg.carry)})
	}
	for _, id := range seg.holds {
		h := &holds[id]
		spans = append(spans, span3{h.Invoke, h.Start, end(id)})
	}
	if len(spans) > 1 {
		slices.SortFunc(spans, func(a, b span3) int {
			if c := cmp.Compare(a.start, b.start); c != 0 {
				return c
			}
			return cmp.Compare(a.end, b.end)
		})
	}
	for k, s := range spans {
		if s.call > s.start || s.start > s.end || k > 0 && spans[k-1].end > s.start {
			return spans, false
		}
	}
	return spans, true
}
