package checker

import (
	"cmp"
	"maps"
	"slices"
	"sort"

	"github.com/anishathalye/porcupine"
)

// A fold decides its prefix's findings on the spot (fold.go), so a run that broke the lock early
// folds on like any other: what the steps after the stream take from the folded holds is kept
// here, with the few holds the listed findings name (parsed.kept). Every list is kept in the order
// the whole-history check lists it (key by key, in time within a key), cut where no later fold can
// bring an entry back under the limit: later entries only come after, in their key or in a later
// one, so an entry past the limit now stays past it.

// foldedFindings are the folded holds' findings.
type foldedFindings struct {
	// porcupine on the folded segments: whether one was illegal, one undecided; the segments it
	// ran out of time for or that were too long, and all it left undecided.
	illegal, unknown   bool
	timedOut, tooLarge int
	left               int
	disagreements      []disagreement // index: the segment's place among its key's
	// overlapping pairs: how many, the earliest overlap, and per key the first in the sweep's
	// order, with what the culprit step took from them at the fold.
	violations   int
	firstOverlap int64
	pairs        map[string][]listedPair
	// fencing tokens that went back: how many, per key whether the last folded acquire did, and
	// per key the first of each run (the highest token before it, the acquire).
	regressions int
	regressing  map[string]bool
	regressed   map[string][]pair
	// the visualization's choice so far (see chooseDrawn): its operations, the segments that did
	// not fit, and those drawn, by absolute hold id.
	shownOps, skipped int
	drawn             []segment
}

// listedPair is an overlapping pair as the result lists it, by absolute hold id. seg is its segment
// among the unfolded ones (-1 for a folded pair); a folded pair says whether its segment is drawn,
// and the culprit named at the fold from the releases and acquires around it ("" for none yet).
type listedPair struct {
	pair
	seg     int32
	drawn   bool
	culprit string
}

func newFoldedFindings() foldedFindings {
	return foldedFindings{firstOverlap: Never, pairs: map[string][]listedPair{}, regressing: map[string]bool{}, regressed: map[string][]pair{}}
}

// foldFindings decides the findings of the prefix F (the first len(F) holds, ids from p.base),
// whose segments checkSegments decided (out): before absorb and foldCulprits, since the culprits
// and the token walk read what those move on.
func (pr *parser) foldFindings(F []hold, keys []string, byKey map[string][]int32, segs []segment, out porcupineOutcome) {
	fs := pr.p.folded
	fd := &fs.findings
	limit := pr.folding.opts.MaxViolations
	fd.timedOut += out.timedOut
	fd.tooLarge += out.tooLarge
	switch out.result {
	case porcupine.Illegal:
		fd.illegal = true
	case porcupine.Unknown:
		fd.unknown = true
	}
	pr.foldOverlaps(F, keys, byKey, segs, limit)
	within := map[string]int{}
	for i := range segs {
		s := &segs[i]
		k := s.key(F)
		index := fs.segsByKey[k] + within[k]
		within[k]++
		if s.result == segUnknown {
			fd.left++
		} else if (s.result == segIllegal) != (s.violations > 0) {
			fd.disagreements = append(fd.disagreements, disagreement{key: k, index: index, result: s.result, violations: s.violations})
		}
	}
	pr.foldRegressions(F, limit)
	pr.foldDrawn(F, segs)
	keyMajor(fd.pairs, limit)
	keyMajor(fd.regressed, limit)
}

// foldOverlaps sweeps F's keys as step 3 does: it counts the overlaps in their segments and lists
// the first of each key, each with the culprit the operations around it name now.
func (pr *parser) foldOverlaps(F []hold, keys []string, byKey map[string][]int32, segs []segment, limit int) {
	p, fd := pr.p, &pr.p.folded.findings
	segOf := make([]int32, len(F))
	for i := range segs {
		for _, id := range segs[i].holds {
			segOf[id] = int32(i)
		}
	}
	for _, k := range keys {
		sweep(F, byKey[k], func(pa pair) {
			fd.violations++
			fd.firstOverlap = min(fd.firstOverlap, max(F[pa.a].Start, F[pa.b].Start))
			si := segmentOfPair(F, segOf, pa)
			segs[si].violations++
			if len(fd.pairs[k]) < limit {
				abs := pair{pa.a + p.base, pa.b + p.base}
				fd.pairs[k] = append(fd.pairs[k], listedPair{pair: abs, seg: si, culprit: p.cul.culpritNow(p, abs.a, abs.b)})
			}
		})
	}
}

// foldDrawn chooses the segments of F the page draws, and marks the pairs F listed (their seg is
// still F's) drawn or not.
func (pr *parser) foldDrawn(F []hold, segs []segment) {
	p, fd := pr.p, &pr.p.folded.findings
	order, drawn := fd.chooseDrawn(F, segs, pr.folding.opts.MaxVisualizedOps)
	for _, lps := range fd.pairs {
		for i := range lps {
			if lps[i].seg >= 0 {
				lps[i].drawn, lps[i].seg = drawn[int(lps[i].seg)], -1
			}
		}
	}
	for _, si := range order {
		fd.drawn = append(fd.drawn, absoluteSegment(segs[si], p.base))
	}
}

// foldRegressions walks F's fencing tokens as tokenRegressions walks the whole history's, from the
// highest token folded before and the state of the run the last folded acquire was in.
func (pr *parser) foldRegressions(F []hold, limit int) {
	p, fs := pr.p, pr.p.folded
	fd := &fs.findings
	for _, k := range sortedTokenKeys(F) {
		best, _ := fs.tokenBest(k, p)
		bestID := fs.tokens[k].id
		var ids []int32
		for i := range F {
			if F[i].Token > 0 && F[i].key == k {
				ids = append(ids, int32(i))
			}
		}
		prev := fd.regressing[k]
		walkRegressions(F, ids, best, bestID-p.base, &prev, func(a int32, _ *hold, h int32, first bool) {
			fd.regressions++
			if first && len(fd.regressed[k]) < limit {
				fd.regressed[k] = append(fd.regressed[k], pair{a + p.base, h + p.base})
			}
		})
		fd.regressing[k] = prev
	}
}

// walkRegressions walks holds ids (one key's, with a token) in invoke order from best (the highest
// token before them, with its id, nil for none) and calls found for each acquire whose token is not
// above the highest of those that completed before it was invoked, with that highest one (and its
// id), and whether it is the first of a run of them. prev is whether the acquire before them went back
// too, and is left as the last one did.
func walkRegressions(holds []hold, ids []int32, best *hold, bestID int32, prev *bool, found func(a int32, best *hold, h int32, first bool)) {
	byStart := slices.Clone(ids)
	sort.SliceStable(byStart, func(a, b int) bool { return holds[byStart[a]].Start < holds[byStart[b]].Start })
	byInvoke := slices.Clone(ids)
	sort.SliceStable(byInvoke, func(a, b int) bool { return holds[byInvoke[a]].Invoke < holds[byInvoke[b]].Invoke })
	n := 0
	for _, id := range byInvoke {
		h := &holds[id]
		for n < len(byStart) && holds[byStart[n]].Start < h.Invoke {
			if best == nil || holds[byStart[n]].Token > best.Token {
				best, bestID = &holds[byStart[n]], byStart[n]
			}
			n++
		}
		if best == nil || h.Token > best.Token || sameLeaseAgain(best, h) {
			*prev = false
			continue
		}
		// Once a counter is reset every acquire goes backwards until the tokens pass the old
		// highest again; the first of such a run is the one to explain.
		first := !*prev
		*prev = true
		found(bestID, best, id, first)
	}
}

// chooseDrawn picks, among segs (of holds), the ones the visualization draws when it cannot draw
// them all: those that failed or hold a violation, in order of their start, while they fit in
// maxOps operations with those chosen before (see prepareVisualization): their indexes in that
// order, and as a set.
func (fd *foldedFindings) chooseDrawn(holds []hold, segs []segment, maxOps int) (order []int, drawn map[int]bool) {
	drawn = map[int]bool{}
	var failed []int
	for i := range segs {
		if segs[i].result == segIllegal || segs[i].violations > 0 {
			failed = append(failed, i)
		}
	}
	for _, si := range byStart(holds, segs, failed) {
		s := &segs[si]
		if fd.shownOps+s.ops() > maxOps {
			fd.skipped++
			continue
		}
		fd.shownOps += s.ops()
		drawn[si] = true
		order = append(order, si)
	}
	return order, drawn
}

// byStart is the indexes ids of segs in order of their segments' start, in their order among equals.
func byStart(holds []hold, segs []segment, ids []int) []int {
	starts := make(map[int]int64, len(ids))
	for _, i := range ids {
		starts[i] = segStart(holds, &segs[i])
	}
	slices.SortStableFunc(ids, func(a, b int) int { return cmp.Compare(starts[a], starts[b]) })
	return ids
}

// segStart is when a segment begins: its carried hold's cut, or its first acquire's invoke.
func segStart(holds []hold, s *segment) int64 {
	t := int64(Never)
	if s.carry != free {
		t = s.in
	}
	for _, id := range s.holds {
		t = min(t, holds[id].Invoke)
	}
	return t
}

// absoluteSegment is s with its hold ids moved by base.
func absoluteSegment(s segment, base int32) segment {
	ids := make([]int32, len(s.holds))
	for i, id := range s.holds {
		ids[i] = id + base
	}
	s.holds = ids
	if s.carry != free {
		s.carry += base
	}
	if s.cut != free {
		s.cut += base
	}
	return s
}

// keyMajor cuts per-key lists where, read key by key, they pass limit.
func keyMajor[T any](lists map[string][]T, limit int) {
	n := 0
	for _, k := range slices.Sorted(maps.Keys(lists)) {
		l := lists[k][:min(len(lists[k]), max(limit-n, 0))]
		n += len(l)
		if len(l) == 0 {
			delete(lists, k)
		} else {
			lists[k] = slices.Clip(l)
		}
	}
}

// keptIDs are the folded holds the listed findings name: the pairs', the regressions' and the drawn
// segments' holds.
func (fd *foldedFindings) keptIDs() map[int32]struct{} {
	ids := map[int32]struct{}{}
	for _, lps := range fd.pairs {
		for _, lp := range lps {
			ids[lp.a], ids[lp.b] = struct{}{}, struct{}{}
		}
	}
	for _, prs := range fd.regressed {
		for _, pa := range prs {
			ids[pa.a], ids[pa.b] = struct{}{}, struct{}{}
		}
	}
	for i := range fd.drawn {
		s := &fd.drawn[i]
		for _, id := range s.holds {
			ids[id] = struct{}{}
		}
		for _, id := range []int32{s.carry, s.cut} {
			if id != free {
				ids[id] = struct{}{}
			}
		}
	}
	return ids
}

// found is what the folds found (none for a nil *foldSums): what the steps after the stream take.
func (s *foldSums) found() *foldedFindings {
	if s == nil {
		nothing := newFoldedFindings()
		return &nothing
	}
	return &s.findings
}

// withPorcupine is porcupine's outcome over the folded segments and the others (out).
func (fd *foldedFindings) withPorcupine(out porcupineOutcome) porcupineOutcome {
	out.timedOut += fd.timedOut
	out.tooLarge += fd.tooLarge
	switch {
	case fd.illegal || out.result == porcupine.Illegal:
		out.result = porcupine.Illegal
	case fd.unknown || out.result == porcupine.Unknown:
		out.result = porcupine.Unknown
	}
	return out
}

// listed merges per-key lists, the folded ones (folded) before the others (live) in each key, key
// by key, up to limit.
func listed[T any](folded, live map[string][]T, limit int) []T {
	all := map[string]bool{}
	for k := range folded {
		all[k] = true
	}
	for k := range live {
		all[k] = true
	}
	var out []T
	for _, k := range slices.Sorted(maps.Keys(all)) {
		for _, l := range [][]T{folded[k], live[k]} {
			out = append(out, l[:min(len(l), limit-len(out))]...)
		}
	}
	return out
}

// disagreements are the folded segments' disagreements, each with its place among every segment:
// the segments of the keys before its own (folded, and the unfolded segs), then its place in its key.
func (s *foldSums) disagreements(holds []hold, segs []segment) []disagreement {
	if s == nil || len(s.findings.disagreements) == 0 {
		return nil
	}
	before := map[string]int{}
	for i := range segs {
		before[segs[i].key(holds)]++
	}
	for k, n := range s.segsByKey {
		before[k] += n
	}
	out := slices.Clone(s.findings.disagreements)
	for i := range out {
		for k, n := range before {
			if k < out[i].key {
				out[i].index += n
			}
		}
	}
	return out
}
