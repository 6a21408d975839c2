package checker

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// Folding keeps a streamed check's memory from growing with the run (issue 28). Every foldEvery
// grants, the parser looks for a cut: an instant before which a prefix of the holds (by id) all
// ended, and after which every other hold, and every operation still in flight, was invoked. Such a
// prefix is decided on the spot, by every step that reads holds after the stream, and folded: its
// holds are dropped, and what they add to the result is kept as counts and sums (foldSums), the
// same figures the steps would have computed from them at the end. Its findings are decided then
// too, and only the holds they list are kept (foldfindings.go).
//
// Why the cut makes this exact: no hold after it can overlap, share a segment with, or follow in
// fencing order a hold before it (segmentsOf cuts at such a quiet point on every key), so those
// steps see the two sides apart; the time-ordered history means no later event can end, move or
// find a hold that ended before the cut except through the process's own lists (open, recent,
// levels, the culprits' live leases and last releases), and the holds those still name are kept
// (pinned) until they leave them. What a pinned hold can still change (its work's end, its extends,
// whether its release came back ok) changes only findings that are taken from it when it leaves.
//
// Folding needs no read or write of a resource so far, and a run plan, if the history has one,
// with the mutex workload: a counter run's resource check looks holds up by process at every read
// and write (a history with no plan whose first read or write comes after a fold gets an unknown
// resource verdict that says so). It also needs no fault operation in flight (the folded holds are
// tallied against the fault windows so far: see absorbFaults), and enough porcupine operations
// that the visualization shows failed segments only.
// A whole-history check (CheckLog) never folds; the streamed check must give the same result, to
// the byte, which the tests compare with folding forced after every grant.

// foldEvery is how many new holds the parser takes between two looks for a fold.
const foldEvery = 1 << 16

// foldSums is what the folded holds add to the steps after the stream.
type foldSums struct {
	holds                                           int            // folded holds: the ids below parsed.base
	segs                                            int            // their porcupine segments, every one ok
	segsByKey                                       map[string]int // the same, per key
	ops                                             int            // their porcupine operations
	nearDeadline, toDeadline, pastExpiry, unbounded int
	// inFaults, outFaults and whollyInFaults are faultSplit's and whollyInFaults's counts;
	// regrants, per fault window's Applied, the earliest grant of an acquire invoked after it.
	inFaults, outFaults, whollyInFaults int
	regrants                            map[int64]int64
	held                                map[string]int64 // per key, the time the non-dead holds covered
	grants                              map[string]int   // per key, the non-dead holds
	lastEnd                             map[string]int64 // per key, the latest end of a non-dead hold
	promised                            latencies
	tokens                              map[string]foldedBest // per key, the hold with the highest fencing token
	overruns                            []foldedOverrun       // the overruns with the smallest ids, at most 2*limit
	overrunN                            int
	values                              *valueIndex
	late                                []foldedLate // late releases named when their list was folded
	lateN                               int          // every late release folded, named or not
	holders                             []holderAt   // the holder during p.lateExtends[i], for i < len(holders)
	// resourceAfter: a read or write came after holds were folded (a history whose plan said
	// mutex); the resource check could not see the folded holds.
	resourceAfter bool
	findings      foldedFindings
}

type foldedBest struct {
	id int32
	h  hold
}

type foldedOverrun struct {
	id int32
	o  Overrun
}

// foldedLate is a late release's culprit, its cause left for the end (it needs every fault).
type foldedLate struct {
	u          Culprit
	holdInvoke int64
}

// holderAt is holderDuring's answer, found at a fold: ok false for none.
type holderAt struct {
	ok      bool
	process int
	start   int64
}

func newFoldSums() *foldSums {
	return &foldSums{segsByKey: map[string]int{}, held: map[string]int64{}, grants: map[string]int{},
		lastEnd: map[string]int64{}, tokens: map[string]foldedBest{}, values: newValueIndex(), regrants: map[int64]int64{},
		findings: newFoldedFindings()}
}

// folding is the parser's state of folding.
type folding struct {
	every int // 0: never fold (a whole-history check)
	next  int // fold again once len(p.holds) reaches it
	opts  Options
}

// maybeFold folds when enough holds came since the last look (see the top of this file).
func (pr *parser) maybeFold() {
	f := &pr.folding
	if f.every <= 0 || len(pr.p.holds) < f.next {
		return
	}
	before := pr.p.base
	pr.fold()
	f.next = len(pr.p.holds) + f.every
	if pr.p.base == before {
		// Nothing folded (a hold that lasts, a fault in flight): look again only once the holds
		// grew by half, so that looking costs O(n log n) over a run rather than O(n^2).
		f.next = len(pr.p.holds) + max(f.every, len(pr.p.holds)/2)
	}
}

// foldable reports whether the run allows folding at all (see the top of this file).
func (pr *parser) foldable() bool {
	st := pr.st
	if st.n == 0 || pr.resourceSeen {
		return false
	}
	for _, q := range pr.nemInflight {
		if len(q) > 0 {
			return false // a fault whose window is not known yet
		}
	}
	pl := st.at(0).Plan
	return pl == nil || pl.Workload == "mutex"
}

func (pr *parser) fold() {
	if !pr.foldable() {
		return
	}
	p, opts := pr.p, pr.folding.opts
	cut, now := pr.cutTime()
	k := validCut(p.holds, cut, len(p.holds))
	if k == 0 {
		return
	}
	F := p.holds[:k]
	keys, byKey := keyOrder(F)
	segs := segmentsOf(F, keys, byKey, true)
	ops := 0
	for i := range segs {
		ops += segs[i].ops()
	}
	if ops+p.folded.opCount() <= opts.MaxVisualizedOps {
		return // the visualization would show every segment: it needs them all
	}
	began := time.Now()
	out := checkSegments(lockModel(F), F, segs, p.porcupineLeft(opts.Timeout), opts.alwaysPorcupine)
	p.porcupineUsed += time.Since(began)
	if p.folded == nil {
		p.folded = newFoldSums()
		if pl := pr.st.at(0).Plan; pl != nil {
			pr.planExpiry = pl.Expiry
		}
	}
	pr.foldFindings(F, keys, byKey, segs, out)
	pr.foldCulprits(now, minInvoke(p.holds[k:], cut))
	pr.pinnedIDs = pr.referenced(p.base + int32(k))
	pr.absorb(F, segs)
	pr.dropHolds(k)
}

// minInvoke is the earliest invoke of holds, or t if earlier.
func minInvoke(holds []hold, t int64) int64 {
	for i := range holds {
		t = min(t, holds[i].Invoke)
	}
	return t
}

// cutTime is the latest instant before every operation still in flight and every event to come:
// the current event's time (now), or an earlier invoke still waiting for its completion, or that of
// a late release or extend that completed now, whose holder foldCulprits finds at the next fold
// (a hold granted later may still start now).
func (pr *parser) cutTime() (cut, now int64) {
	p, st := pr.p, pr.st
	now = st.at(st.n - 1).Time
	cut = now
	pr.inflight.Each(func(_ int, j int) { cut = min(cut, st.at(j).Time) })
	rs := p.cul.releases
	for i := len(rs) - 1; i >= 0 && rs[i].comp >= now; i-- {
		cut = min(cut, rs[i].inv)
	}
	for i := len(p.lateExtends) - 1; i >= 0 && p.lateExtends[i].Completed >= now; i-- {
		cut = min(cut, p.lateExtends[i].Invoke)
	}
	return cut, now
}

// validCut is the largest k <= limit such that every hold before k ended before cut and before
// every hold from k on was invoked (0 if none).
func validCut(holds []hold, cut int64, limit int) int {
	n := len(holds)
	sufMin := make([]int64, n+1) // the earliest invoke of holds[i:]
	sufMin[n] = math.MaxInt64
	for i := n - 1; i >= 0; i-- {
		sufMin[i] = min(sufMin[i+1], holds[i].Invoke)
	}
	best, maxEnd := 0, int64(math.MinInt64)
	for k := 1; k <= limit; k++ {
		maxEnd = max(maxEnd, holds[k-1].End)
		if maxEnd < min(cut, sufMin[k]) {
			best = k
		}
	}
	return best
}

// absorb adds the prefix F, whose segments foldFindings decided, to the sums: what each step
// after the stream would take from it.
func (pr *parser) absorb(F []hold, segs []segment) {
	s, p := pr.p.folded, pr.p
	s.segs += len(segs)
	for i := range segs {
		s.segsByKey[segs[i].key(F)]++
		s.ops += segs[i].ops()
	}
	pr.absorbFaults(F)
	s.values.addAll(F)
	ivs := map[string][][2]int64{}
	for i := range F {
		h := &F[i]
		id := p.base + int32(i)
		if _, pinned := pr.pinnedIDs[id]; !pinned {
			s.settled(id, h, pr.folding.opts.MaxViolations)
		}
		switch {
		case h.dead:
		case h.granted == Never:
			s.unbounded++
		case h.Validity > 0:
			s.promised.add(h.Validity)
		default:
			s.promised.add(h.granted - h.Start)
		}
		if h.dead {
			continue
		}
		ivs[h.key] = append(ivs[h.key], [2]int64{h.Start, h.End})
		s.grants[h.key]++
		s.lastEnd[h.key] = max(s.lastEnd[h.key], h.End)
		if h.EndedBy == endExpiry && h.Deadline != Never {
			s.toDeadline++
		}
		if h.granted == Never && pr.planExpiry > 0 && h.End != Never && 10*(h.End-h.Start) >= 9*pr.planExpiry {
			s.pastExpiry++
		}
	}
	for k, iv := range ivs {
		s.held[k] += unionLength(iv)
	}
	pr.absorbTokens(F)
}

// absorbTokens keeps, per key, the hold of F and before with the highest fencing token, the
// earliest started among equals: what the end's walk (tokenRegressions) starts from, since every
// hold after the cut was invoked after each of them had started.
func (pr *parser) absorbTokens(F []hold) {
	s, p := pr.p.folded, pr.p
	for _, k := range sortedTokenKeys(F) {
		best, _ := s.tokenBest(k, p)
		bestID := s.tokens[k].id
		byStart := make([]int, 0, len(F))
		for i := range F {
			if F[i].key == k && F[i].Token > 0 {
				byStart = append(byStart, i)
			}
		}
		sort.SliceStable(byStart, func(a, b int) bool { return F[byStart[a]].Start < F[byStart[b]].Start })
		for _, i := range byStart {
			if best == nil || F[i].Token > best.Token {
				best, bestID = &F[i], p.base+int32(i)
			}
		}
		s.tokens[k] = foldedBest{id: bestID, h: *best}
	}
}

// withRegrants gives each regrant the earliest folded grant after its fault, where that is earlier.
func (s *foldSums) withRegrants(rgs []Regrant) []Regrant {
	if s == nil {
		return rgs
	}
	for i := range rgs {
		g, ok := s.regrants[rgs[i].Applied]
		if ok && (rgs[i].Grant < 0 || g < rgs[i].Grant) {
			rgs[i].Grant, rgs[i].Gap = g, g-rgs[i].Applied
		}
	}
	return rgs
}

// segCount, holdCount and nearDeadlines are the folded holds' segments, holds and holds released
// near their deadline, the pinned ones as they are now (0 for none folded).
func (s *foldSums) segCount() int {
	if s == nil {
		return 0
	}
	return s.segs
}

func (s *foldSums) holdCount() int {
	if s == nil {
		return 0
	}
	return s.holds
}

func (s *foldSums) nearDeadlines(p *parsed) int {
	if s == nil {
		return 0
	}
	n := s.nearDeadline
	for _, h := range p.pinned {
		if nearDeadlineHold(h) {
			n++
		}
	}
	return n
}

// wholeIndex is the place the unfolded segment i of key k has among every segment: each key's
// folded segments come before its others.
func (s *foldSums) wholeIndex(i int, k string) int {
	if s == nil {
		return i
	}
	for fk, n := range s.segsByKey {
		if fk <= k {
			i += n
		}
	}
	return i
}

// opCount is the folded holds' porcupine operations (0 for none folded).
func (s *foldSums) opCount() int {
	if s == nil {
		return 0
	}
	return s.ops
}

// absorbFaults adds F's tallies against the fault windows. Every fault op so far has completed
// (foldable), so each window's start and applied time are known, and F ended before the current
// event: an open window's end and lift, known only later, come after every hold of F, as the end of
// the history the windows are read to now does. Windows to come start later still.
func (pr *parser) absorbFaults(F []hold) {
	p, s := pr.p, pr.p.folded
	if len(p.nemOps) == 0 {
		s.outFaults += len(F)
		return
	}
	q := *p
	q.nemOps = slices.Clone(p.nemOps)
	slices.SortFunc(q.nemOps, func(a, b nemOp) int { return cmp.Compare(a.inv, b.inv) })
	wins := faultWindows(pr.st, &q)
	in, out := faultSplit(F, wins)
	s.inFaults += in
	s.outFaults += out
	s.whollyInFaults += whollyInFaults(F, wins)
	for _, rg := range regrants(F, wins) {
		if rg.Grant < 0 {
			continue
		}
		if g, ok := s.regrants[rg.Applied]; !ok || rg.Grant < g {
			s.regrants[rg.Applied] = rg.Grant
		}
	}
}

// tokenBest is the folded hold with the highest token of key k, as it is now (a pinned hold may
// have changed since it was folded).
func (s *foldSums) tokenBest(k string, p *parsed) (*hold, bool) {
	if s == nil {
		return nil, false
	}
	b, ok := s.tokens[k]
	if !ok {
		return nil, false
	}
	if h := p.pinned[b.id]; h != nil {
		return h, true
	}
	return &b.h, true
}

// settled takes what a folded hold gives once nothing can change it any more: its overrun (its
// work may end later), whether it was released near its deadline (an extend may still move a
// released lease's deadline), and the state its fencing token is compared in.
func (s *foldSums) settled(id int32, h *hold, limit int) {
	if nearDeadlineHold(h) {
		s.nearDeadline++
	}
	for k, b := range s.tokens {
		if b.id == id {
			b.h = *h
			s.tokens[k] = b
		}
	}
	s.overrun(id, h, limit)
}

// overrun records hold id's overrun, if it has one, keeping the 2*limit smallest ids.
func (s *foldSums) overrun(id int32, h *hold, limit int) {
	if h.WorkEnd == 0 || h.Deadline == Never || h.WorkEnd <= h.Deadline {
		return
	}
	s.overrunN++
	s.overruns = append(s.overruns, foldedOverrun{id: id, o: overrunOf(h)})
	if len(s.overruns) > 2*limit+16 {
		slices.SortFunc(s.overruns, func(a, b foldedOverrun) int { return cmp.Compare(a.id, b.id) })
		s.overruns = s.overruns[:limit]
	}
}

// sortedTokenKeys are the keys of F's holds with a fencing token, in order.
func sortedTokenKeys(F []hold) []string {
	seen := map[string]bool{}
	var keys []string
	for i := range F {
		if F[i].Token > 0 && !seen[F[i].key] {
			seen[F[i].key] = true
			keys = append(keys, F[i].key)
		}
	}
	sort.Strings(keys)
	return keys
}

// foldCulprits names the late releases, and the holders of the late extends, that completed before
// now, while every hold they can name is here (one granted later starts at now or after), and folds
// the culprits' list of ok releases up to trim: every hold left was invoked after it, so no later
// step looks further back.
func (pr *parser) foldCulprits(now, trim int64) {
	p, c, s := pr.p, pr.p.cul, pr.p.folded
	_, byKey := keyOrder(p.holds)
	ix := holdIndex{holds: p.holds, byKey: byKey}
	drop := 0
	for i := range c.releases {
		op := &c.releases[i]
		if op.comp >= now {
			break
		}
		if op.comp < trim {
			drop = i + 1
		}
		if op.named || !op.late() {
			continue
		}
		op.named = true
		s.lateN++
		key := c.relKey(p, op)
		if o := ix.holderDuring(key, int(op.process), op.inv, op.comp); o != nil {
			u := Culprit{Kind: CulpritLateRelease, Key: key, Process: int(op.process), F: history.FRelease, Value: c.relValue(p, op),
				Invoke: op.inv, Completed: op.comp, Deadline: op.deadline, Past: op.inv - op.deadline, Other: o.Process, OtherAt: o.Start}
			s.late = append(s.late, foldedLate{u: u, holdInvoke: p.at(op.hold).Invoke})
		}
	}
	c.releases = slices.Delete(c.releases, 0, drop)
	for i := len(s.holders); i < min(len(p.lateExtends), pr.folding.opts.MaxViolations) && p.lateExtends[i].Completed < now; i++ {
		l := &p.lateExtends[i]
		var at holderAt
		if o := ix.holderDuring(l.Key, l.Process, l.Invoke, l.Completed); o != nil {
			at = holderAt{ok: true, process: o.Process, start: o.Start}
		}
		s.holders = append(s.holders, at)
	}
	for pk := range c.priorInfo {
		if pk[1] < trim {
			delete(c.priorInfo, pk)
		}
	}
}

// referenced are the ids below end that the stream may still reach: the processes' open and recent
// holds and reentrant levels, and the culprits' live leases, last releases and unfolded releases.
func (pr *parser) referenced(end int32) map[int32]struct{} {
	c := pr.p.cul
	ids := map[int32]struct{}{}
	add := func(id int32) {
		if id >= 0 && id < end {
			ids[id] = struct{}{}
		}
	}
	each := func(_ int, hs []int32) {
		for _, id := range hs {
			add(id)
		}
	}
	pr.open.Each(each)
	pr.recent.Each(each)
	for _, ls := range pr.levels {
		for _, l := range ls {
			add(l.h)
		}
	}
	for _, t := range c.keys {
		for _, id := range t.live {
			add(id)
		}
		if t.hasLast {
			add(t.last.hold)
		}
	}
	for i := range c.releases {
		add(c.releases[i].hold)
	}
	return ids
}

// dropHolds folds the first k holds: the ones still referred to move to pinned, the others go, and
// a pinned hold no longer referred to gives its overrun, now final.
func (pr *parser) dropHolds(k int) {
	p, s := pr.p, pr.p.folded
	pinned := make(map[int32]*hold, len(pr.pinnedIDs))
	for id := range pr.pinnedIDs {
		if h := p.pinned[id]; h != nil {
			pinned[id] = h
		} else {
			h := p.holds[id-p.base]
			pinned[id] = &h
		}
	}
	for id, h := range p.pinned {
		if pinned[id] == nil {
			s.settled(id, h, pr.folding.opts.MaxViolations)
		}
	}
	p.kept = pr.kept(k, pinned)
	p.pinned = pinned
	rest := make([]hold, len(p.holds)-k, len(p.holds)-k+pr.folding.every)
	copy(rest, p.holds[k:])
	p.holds = rest
	p.base += int32(k)
	s.holds += k
}

// kept are the folded holds the folded findings name (foldedFindings.keptIDs), once the first k
// holds are folded: those still pinned are found there, the others are taken as they are now.
func (pr *parser) kept(k int, pinned map[int32]*hold) map[int32]*hold {
	p, s := pr.p, pr.p.folded
	ids := s.findings.keptIDs()
	if len(ids) == 0 {
		return nil
	}
	kept := make(map[int32]*hold, len(ids))
	for id := range ids {
		switch {
		case pinned[id] != nil:
			continue
		case p.pinned[id] != nil:
			kept[id] = p.pinned[id]
		case p.kept[id] != nil:
			kept[id] = p.kept[id]
		case id >= p.base && id < p.base+int32(k):
			h := p.holds[id-p.base]
			kept[id] = &h
		default:
			kept[id] = s.tokenHold(id) // a folded highest token, found again by a later fold
		}
	}
	return kept
}

// tokenHold is the folded hold id with the highest token of its key.
func (s *foldSums) tokenHold(id int32) *hold {
	for _, b := range s.tokens {
		if b.id == id {
			h := b.h
			return &h
		}
	}
	panic("checker: a folded finding names a hold no fold kept") // keptIDs and kept disagree
}

// foldStart is when folding is set up for a streamed check.
func (pr *parser) foldStart(opts Options) {
	every := opts.foldEvery
	if every == 0 {
		every = foldEvery
	}
	pr.folding = folding{every: every, next: every, opts: opts}
}

// porcupineLeft is the time porcupine has left, as checkSegments takes it (0: no limit): what the
// folds before left of timeout, at least a nanosecond.
func (p *parsed) porcupineLeft(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return 0
	}
	return max(timeout-p.porcupineUsed, 1)
}
