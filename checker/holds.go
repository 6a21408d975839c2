package checker

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/internal/proctable"
)

// hold is one grant as the pipeline keeps it: a HoldInfo (see info) in 128 bytes rather than 200,
// since a long run keeps millions. What most holds share (their nodes) or few have (a re-entry's
// words) is behind extra; what ended them is a byte.
type hold struct {
	Invoke, Start, End, Deadline, Validity, WorkEnd, Token int64
	// lateTo is how far late extends renewed the lease after its hold had ended: an extend that
	// completes within it renews a lease already counted late once, and is not counted again.
	lateTo int64
	// granted is the deadline the lease was granted with (Never for none), before any renewal or
	// loss moved Deadline.
	granted int64
	Process int
	Value   string
	key     string
	extra   *holdExtra // nil: no nodes, no re-entry
	Extends int32
	EndedBy endedBy
	// dead marks a lease that had expired by the time its acquire completed: it grants no hold and
	// is left out of the lock-level analyses, but releases and work still find it (so they pair with
	// the same leases as before) and its work can be an overrun.
	dead bool
	// released marks a lease whose release completed ok: the lock let it go for certain.
	released bool
}

// holdExtra is what a hold rarely has of its own: the nodes that granted it (one value shared by
// every hold the same nodes granted) and, for a re-entry that is a grant, why.
type holdExtra struct {
	nodes   []string
	reentry string
}

// endedBy is HoldInfo.EndedBy as a byte.
type endedBy uint8

const (
	endExpiry endedBy = iota
	endRelease
	endNever
	endCrash
	endLost
	endExpiredOnArrival
)

var endedByWords = [...]string{"expiry", "release", "never", "crash", "lost", "expired on arrival"}

func (e endedBy) String() string { return endedByWords[e] }

// nodes are the nodes that granted the lease.
func (h *hold) nodes() []string {
	if h.extra == nil {
		return nil
	}
	return h.extra.nodes
}

func (h *hold) reentry() string {
	if h.extra == nil {
		return ""
	}
	return h.extra.reentry
}

// setReentry records why a re-entry is a grant of its own, on an extra of the hold's own.
func (h *hold) setReentry(s string) {
	h.extra = &holdExtra{nodes: h.nodes(), reentry: s}
}

// info is the hold as results show it.
func (h *hold) info() HoldInfo {
	return HoldInfo{
		Process: h.Process, Value: h.Value, Token: h.Token, Invoke: h.Invoke, Start: h.Start, End: h.End,
		EndedBy: h.EndedBy.String(), Deadline: h.Deadline, Validity: h.Validity, Nodes: h.nodes(),
		WorkEnd: h.WorkEnd, Extends: int(h.Extends), Reentry: h.reentry(),
	}
}

// expiredOnArrival reports whether a lease ending at deadline was already over when its acquire
// completed at done: the client could never have used it.
func expiredOnArrival(done, deadline int64) bool { return deadline <= done }

// nemOp is one nemesis operation: an invoke and its completion (comp is -1 if it never completed).
type nemOp struct{ inv, comp int }

// parsed is what step 1 extracts from a history.
type parsed struct {
	// holds are the holds not yet folded (see fold.go): hold id base+i is holds[i]. Folded holds
	// that the stream may still touch are in pinned, those the folded findings name in kept; at
	// finds any.
	holds  []hold
	base   int32
	pinned map[int32]*hold
	kept   map[int32]*hold
	// folded is what the folds took in (nil: none happened).
	folded  *foldSums
	nemesis []int // indexes of nemesis events, in time order
	roles   []int // indexes of the system's role changes, in time order
	nemOps  []nemOp
	// pairOf maps each nemesis event to the other half of its operation (see readFault).
	pairOf map[int]int
	stats  Stats
	okLat  latencies // of ok acquires
	allLat latencies // of every completed acquire
	first  int64
	last   int64
	notes  []string
	// expired counts, per key, the ok acquires whose lease had expired on arrival.
	expired map[string]int
	// lateExtends are the ok extends that completed after their lease had ended (see extendHold);
	// earlyLosses the releases and extends refused as lost before their deadline (see lostAt).
	lateExtends []LateExtend
	earlyLosses []EarlyLoss
	// live is, per key, what the liveness check needs (see keyLive).
	live map[string]*keyLive
	// cul is what the culprit findings and the edge evidence need (see culprits).
	cul *culprits
	// porcupineUsed is the time porcupine took at the folds: the end has what is left of
	// Options.Timeout, which bounds porcupine over all segments.
	porcupineUsed time.Duration
}

// at is hold id: a hold not yet folded, or a folded one the stream still refers to.
func (p *parsed) at(id int32) *hold {
	if id >= p.base {
		return &p.holds[id-p.base]
	}
	if h := p.pinned[id]; h != nil {
		return h
	}
	if h := p.kept[id]; h != nil {
		return h
	}
	panic("checker: hold folded while still referred to") // a reference fold.go's pinning missed
}

// Step 1 helpers shared with the Monitor, so the online and offline checks agree on what a hold is.

// effectiveDeadline maps a missing deadline (a lock that promised none) to Never.
func effectiveDeadline(d int64) int64 {
	if d <= 0 {
		return Never
	}
	return d
}

// holdEnd is when a hold ends: the earlier of the release invoke and the deadline, and never before
// the hold started (a lease that expired before the client learned of it grants no hold at all; it
// is marked dead and ends where it starts).
func holdEnd(start, deadline, release int64) (end int64, by endedBy) {
	end, by = deadline, endExpiry
	if release < deadline {
		end, by = release, endRelease
	}
	if deadline == Never && release == Never {
		by = endNever
	}
	if end < start {
		end = start
	}
	return end, by
}

// releaseHold ends h at t, a release invoke of it: the client left its critical section. A hold
// that had already ended (expired on arrival, reported lost) keeps its end: a release never
// revives it, even when a renewal at the instant of the loss moved its deadline.
func releaseHold(h *hold, t int64) {
	if h.dead || h.EndedBy == endLost {
		return
	}
	h.End, h.EndedBy = holdEnd(h.Start, h.Deadline, t)
}

// matchLease reports whether a release or work naming key and value refers to a lease on hkey
// with value hvalue; an empty key or value matches anything, for locks that do not report them.
func matchLease(hkey, hvalue, key, value string) bool {
	return (key == "" || key == hkey) && (value == "" || hvalue == "" || value == hvalue)
}

// findLease returns the position of the latest of n open holds that a release naming key and value
// ends, or -1. The parser and the Monitor both use it, so they pair releases with holds alike.
func findLease(n int, at func(int) *hold, key, value string) int {
	for j := n - 1; j >= 0; j-- {
		h := at(j)
		if matchLease(h.key, h.Value, key, value) {
			return j
		}
	}
	return -1
}

// dropExpired removes from a process's open holds those whose deadline is at or before t, the start
// of its new hold: a release can no longer change when they ended (it would come after the
// deadline), and keeping them would make a process that never releases cost more at every event.
func dropExpired[T any](open []T, at func(int) *hold, t int64) []T {
	kept := 0
	for j := range open {
		if at(j).Deadline > t {
			open[kept] = open[j]
			kept++
		}
	}
	return open[:kept]
}

// recentHolds bounds how far back work events look for their lease, so a stray work event costs
// O(1) rather than a scan of every hold of the process.
const recentHolds = 8

// parse pairs invocations with completions and builds holds, nemesis operations and statistics
// (step 1). It reads a history that validate has accepted, so every completion has its invoke.
func parse(events []history.Event) *parsed {
	pr := newParser(sliceStore(&history.Log{Events: events}))
	for i := range events {
		pr.event(i)
	}
	return pr.finish()
}

// parser is step 1 one event at a time: event(i) takes event i of its store, in order, and finish
// returns what the history parsed to.
type parser struct {
	st          *store
	p           *parsed
	inflight    proctable.Table[int]     // process -> index of its in-flight invoke
	open        proctable.Table[[]int32] // process -> holds with no release invoked yet
	recent      proctable.Table[[]int32] // process -> its latest holds, for work events
	nemInflight map[string][]int         // nemesis F -> invokes waiting for completion
	byKey       map[string]*Counts
	processes   proctable.Table[struct{}]

	expired, noDeadline, strayRelease, strayWork int
	// foreign marks processes whose release in flight named no hold of theirs.
	foreign proctable.Table[bool]
	// levels are the reentrant levels each process entered and has not left.
	levels levelBook[int32]
	// extras are the holds' shared extras, by their nodes, and the last one given (see extraFor).
	extras    map[string]*holdExtra
	lastExtra *holdExtra
	// lastCounts and lastLive remember the last key's entries of byKey and p.live.
	lastCounts lastKey[Counts]
	lastLive   lastKey[keyLive]

	// folding is how a streamed check folds its holds (fold.go); resourceSeen is set at the first
	// read or write, planExpiry is the plan's expiry, pinnedIDs the ids the last fold pinned.
	folding      folding
	resourceSeen bool
	planExpiry   int64
	pinnedIDs    map[int32]struct{}
}

func newParser(st *store) *parser {
	return &parser{
		st: st, p: &parsed{expired: map[string]int{}, pairOf: map[int]int{}, cul: newCulprits(st)},
		nemInflight: map[string][]int{}, byKey: map[string]*Counts{},
		levels: levelBook[int32]{}, extras: map[string]*holdExtra{},
	}
}

// extraFor is the extra shared by every hold granted by nodes: a run has a handful of node sets
// and millions of grants.
func (pr *parser) extraFor(nodes []string) *holdExtra {
	if nodes == nil {
		return nil
	}
	if pr.lastExtra != nil && slices.Equal(pr.lastExtra.nodes, nodes) {
		return pr.lastExtra
	}
	k := strconv.Itoa(len(nodes)) + "\x00" + strings.Join(nodes, "\x00") // [] and [""] apart
	x := pr.extras[k]
	if x == nil {
		x = &holdExtra{nodes: nodes}
		pr.extras[k] = x
	}
	pr.lastExtra = x
	return x
}

func (pr *parser) keyCounts(k string) *Counts {
	return pr.lastCounts.get(pr.byKey, k, func() *Counts { return &Counts{} })
}

// event parses event i.
func (pr *parser) event(i int) {
	p, st := pr.p, pr.st
	inflight, open, recent, nemInflight := &pr.inflight, &pr.open, &pr.recent, pr.nemInflight
	e := st.at(i)
	if i == 0 || e.Time < p.first {
		p.first = e.Time
	}
	if i == 0 || e.Time > p.last {
		p.last = e.Time
	}
	if isResourceOp(e.F) && !pr.resourceSeen {
		pr.resourceSeen = true
		if p.folded != nil {
			p.folded.resourceAfter = true
		}
	}

	if e.Process == history.NemesisProcess {
		p.nemesis = append(p.nemesis, i)
		if e.Type == history.Invoke {
			nemInflight[e.F] = append(nemInflight[e.F], i)
			return
		}
		// The oldest in-flight invoke of the operation, as validate paired them.
		q := nemInflight[e.F]
		k := max(matchNemesis(len(q), func(k int) *history.Event { return st.at(q[k]) }, e), 0)
		p.nemOps = append(p.nemOps, nemOp{inv: q[k], comp: i})
		p.pairOf[q[k]], p.pairOf[i] = i, q[k]
		nemInflight[e.F] = append(q[:k:k], q[k+1:]...)
		if op := readFault(st.at(q[k]), e); op.crashes(e) {
			pr.crashed(op.Nodes, e.Time)
		}
		return
	}
	if e.Process == history.SystemProcess {
		p.roles = append(p.roles, i)
		return
	}
	if e.Process == history.HarnessProcess {
		return // the run, and the final counter values that belong to the resource check
	}
	pr.processes.Put(e.Process, struct{}{})
	if e.F == history.FRenewed || e.F == history.FLost {
		pr.leaseNews(e)
		return
	}

	if e.Type == history.Invoke {
		inflight.Put(e.Process, i)
		p.cul.invoked(e)
		if e.F == history.FRelease && e.Depth > 0 && pr.leftLevel(e) {
			return
		}
		if e.F == history.FRelease {
			// The release's invoke ends the hold whatever its outcome: the client has left
			// its critical section.
			hs := open.At(e.Process)
			if j := findLease(len(hs), func(j int) *hold { return p.at(hs[j]) }, e.Key, e.Value); j >= 0 {
				releaseHold(p.at(hs[j]), e.Time)
				open.Put(e.Process, append(hs[:j], hs[j+1:]...))
			} else {
				pr.strayRelease++
				pr.foreign.Put(e.Process, true)
			}
		}
		return
	}

	j := inflight.At(e.Process)
	inv := st.at(j)
	inflight.Delete(e.Process)

	switch e.F {
	case history.FAcquire:
		key := e.Key
		if key == "" {
			key = inv.Key
		}
		p.cul.acquired(p, key, inv, e)
		p.stats.Acquires.addAcquire(e)
		pr.keyCounts(key).addAcquire(e)
		pr.acquired(key, e)
		lat := e.Time - inv.Time
		p.allLat.add(lat)
		if e.Type != history.OK {
			return // fail and info never let the process into its critical section
		}
		p.okLat.add(lat)
		if e.Depth > 1 && pr.reentered(e, key) {
			return // the owner entered its hold again: legal, and no new hold
		}
		if e.Deadline <= 0 {
			pr.noDeadline++
		}
		dl := effectiveDeadline(e.Deadline)
		h := hold{key: key, Process: e.Process, Value: e.Value, Token: e.Token,
			Invoke: inv.Time, Start: e.Time, Deadline: dl, Validity: e.Validity, extra: pr.extraFor(e.Nodes)}
		h.granted = dl
		h.End, h.EndedBy = holdEnd(h.Start, dl, Never)
		if e.Depth > 1 {
			h.setReentry(pr.lateReentry(e, key))
		}
		if expiredOnArrival(e.Time, dl) {
			h.dead, h.EndedBy = true, endExpiredOnArrival
			pr.expired++
			p.expired[key]++
		}
		id := pr.grant(h)
		if e.Depth > 0 {
			pr.levels.enter(e.Process, id, e.Depth)
		}
	case history.FRelease, history.FExtend:
		p.cul.leaseOp(p, recent.At(e.Process), inv, e)
		late := len(p.lateExtends)
		p.leaseEvent(recent.At(e.Process), inv, e)
		if len(p.lateExtends) > late {
			pr.revive(&p.lateExtends[late])
		}
		if e.F == history.FRelease {
			pr.foreignUnlock(e)
		}
	case history.FRead, history.FWrite:
		// Reads and writes of the protected resource are work under the process's latest lease
		// of the key (their Value is the counter's, not the lease's). A write whose outcome is
		// unknown was certainly still being worked on when it was invoked.
		at := e.Time
		if e.Type == history.Info {
			at = inv.Time
		}
		r := recent.At(e.Process)
		if k := findLease(len(r), func(k int) *hold { return p.at(r[k]) }, inv.Key, ""); k >= 0 {
			h := p.at(r[k])
			h.WorkEnd = max(h.WorkEnd, at)
		} else {
			pr.strayWork++
		}
	case history.FWork:
		if e.Type != history.OK {
			return
		}
		key, value := inv.Key, inv.Value
		if key == "" {
			key = e.Key
		}
		if value == "" {
			value = e.Value
		}
		r := recent.At(e.Process)
		if k := findLease(len(r), func(k int) *hold { return p.at(r[k]) }, key, value); k >= 0 {
			h := p.at(r[k])
			h.WorkEnd = max(h.WorkEnd, e.Time)
		} else {
			pr.strayWork++
		}
	}
}

// foreignUnlock counts the completion of a release that named no hold of its process: refused as
// not the owner's, as a lock must; accepted, it may have freed another client's lock.
func (pr *parser) foreignUnlock(e *history.Event) {
	if !pr.foreign.At(e.Process) && e.Reason != history.ReasonNotOwner {
		return
	}
	pr.foreign.Delete(e.Process)
	switch {
	case e.Reason == history.ReasonNotOwner:
		pr.p.stats.ForeignUnlocks.Refused++
	case e.Type == history.OK:
		pr.p.stats.ForeignUnlocks.Accepted++
	}
}

// FaultClientCrash is the client-crash nemesis: its fault kills the processes it names ("p<id>").
const FaultClientCrash = "client-crash"

// crashed ends the holds of the processes a client crash killed (nodes, read from the crash's
// invoke and completion as one), at the crash's completion (at): a dead process does no more work,
// whatever its lease still promised.
func (pr *parser) crashed(nodes []string, at int64) {
	for _, n := range nodes {
		pid, ok := processOf(n)
		if !ok {
			continue
		}
		for _, id := range pr.open.At(pid) {
			h := pr.p.at(id)
			if h.dead || h.End <= at {
				continue
			}
			h.End, h.EndedBy = max(at, h.Start), endCrash
			h.Deadline = min(h.Deadline, h.End)
		}
		pr.open.Delete(pid)
		delete(pr.levels, pid)
	}
}

// processOf reads a client fault's target "p<id>".
func processOf(n string) (int, bool) {
	if len(n) < 2 || n[0] != 'p' {
		return 0, false
	}
	pid, err := strconv.Atoi(n[1:])
	return pid, err == nil
}

// grant adds the new hold h of its process (step 1): it joins the process's open and recent holds
// and returns its id.
func (pr *parser) grant(h hold) int32 {
	p := pr.p
	id := p.base + int32(len(p.holds))
	p.holds = append(p.holds, h)
	p.cul.granted(p, id)
	op := pr.open.At(h.Process)
	op = dropExpired(op, func(j int) *hold { return p.at(op[j]) }, h.Start)
	pr.open.Put(h.Process, append(op, id))
	r := append(pr.recent.At(h.Process), id)
	if len(r) > recentHolds {
		r = r[len(r)-recentHolds:]
	}
	pr.recent.Put(h.Process, r)
	return id
}

// revive applies the late renewal l (an extend's ok or the lock's renewed news after the lease's
// promise had ended): every ok that tells a process it holds a key is a grant, so it is a new hold
// from the renewal's completion to the deadline it promised, judged against every other hold (the
// time between the old deadline and the renewal stays unheld). The reentrant levels the process
// entered under the old hold carry over to the new one.
func (pr *parser) revive(l *LateExtend) {
	p := pr.p
	r := pr.recent.At(l.Process)
	k := findLease(len(r), func(k int) *hold { return p.at(r[k]) }, l.Key, l.Value)
	dl := effectiveDeadline(l.NewDeadline)
	h := hold{key: l.Key, Process: l.Process, Value: l.Value, Invoke: l.Invoke, Start: l.Completed, Deadline: dl}
	old := int32(-1)
	if k >= 0 {
		old = r[k]
		o := p.at(old)
		h.Token, h.extra, h.Validity = o.Token, o.extra, o.Validity
	}
	h.granted = dl
	h.End, h.EndedBy = holdEnd(h.Start, dl, Never)
	why := fmt.Sprintf("was told by a late %s at %s that it held the lease again, %s after the lease had ended at %s,",
		strings.TrimPrefix(l.Kind(), "late "), FormatTime(l.Completed), FormatSpan(l.Completed-l.Deadline), FormatTime(l.Deadline))
	if old < 0 {
		why = fmt.Sprintf("was told by an %s at %s that it held a lease it had not been granted,", l.F, FormatTime(l.Completed))
	}
	h.setReentry(why)
	if expiredOnArrival(h.Start, dl) {
		h.dead, h.EndedBy = true, endExpiredOnArrival
	}
	id := pr.grant(h)
	if old >= 0 {
		pr.levels.move(l.Process, old, id)
	}
}

// leaseNews applies a renewal or loss the lock reported by itself to the process's hold of that
// lease: a renewal is judged as an extend is (renewHold: in time it moves the deadline, after the
// lease's promise had ended it is a late renewal); a loss ends the hold there (before a promised
// deadline, an early lease loss; a lease with no deadline promised only that news).
func (pr *parser) leaseNews(e *history.Event) {
	p := pr.p
	r := pr.recent.At(e.Process)
	k := findLease(len(r), func(k int) *hold { return p.at(r[k]) }, e.Key, e.Value)
	if e.F == history.FRenewed {
		p.stats.Renewals++
	}
	if k < 0 {
		return
	}
	h := p.at(r[k])
	if e.F == history.FRenewed {
		// One rule with extends (renewHold): in time it moves the deadline, late it is a finding.
		if old := h.Deadline; renewHold(h, e.Time, e.Deadline) {
			p.lateExtends = append(p.lateExtends, lateRenewal(h, old, e))
			pr.revive(&p.lateExtends[len(p.lateExtends)-1])
		}
		return
	}
	if h.dead || e.Time > h.End {
		return // the hold had ended: news of its loss changes nothing
	}
	p.stats.Losses++
	// A lease with no deadline promised to last until its release or until the lock said it was
	// lost: the news is the promise kept, not broken (as a release refused as lost is, in lostAt).
	// Had the servers dropped it earlier and let another client in, that overlap is the finding.
	if h.Deadline != Never && e.Time < h.Deadline {
		p.earlyLosses = append(p.earlyLosses, EarlyLoss{
			Key: h.key, Process: e.Process, Value: h.Value, F: history.FLost, Invoke: e.Time, Completed: e.Time,
			Deadline: h.Deadline, Early: min(h.Deadline, p.last) - e.Time, asked: h.Invoke,
		})
	}
	h.Deadline = e.Time
	h.End, h.EndedBy = max(e.Time, h.Start), endLost
}

// reentered applies an ok acquire at depth above 1 that continues its process's hold of the
// lease (see continued): legal, and no new hold. It reports false when that hold had ended or
// there was none, so that the acquire is judged as a hold of its own.
func (pr *parser) reentered(e *history.Event, key string) bool {
	hs := pr.open.At(e.Process)
	j := continued(len(hs), func(j int) *hold { return pr.p.at(hs[j]) }, key, e)
	if j < 0 {
		return false
	}
	reenter(pr.p.at(hs[j]), e)
	pr.levels.enter(e.Process, hs[j], e.Depth)
	pr.p.stats.Reentries++
	return true
}

// lateReentry says why a re-entry is a hold of its own: "re-entered at 3.000s (depth 2) after its
// lease was lost at 2.000s".
func (pr *parser) lateReentry(e *history.Event, key string) string {
	pr.p.stats.LateReentries++
	r := pr.recent.At(e.Process)
	k := findLease(len(r), func(k int) *hold { return pr.p.at(r[k]) }, key, e.Value)
	if k < 0 {
		return fmt.Sprintf("re-entered at %s (depth %d) holding no earlier lease of the key", FormatTime(e.Time), e.Depth)
	}
	return fmt.Sprintf("re-entered at %s (depth %d) after %s", FormatTime(e.Time), e.Depth, endedWord(pr.p.at(r[k])))
}

// leftLevel applies the release invoke e at depth d: the process leaves that level, and the hold
// it belongs to ends when it was the last. It reports false when the process entered no such level,
// for a release at depth 1 to end the latest matching hold as a release without depth does.
func (pr *parser) leftLevel(e *history.Event) bool {
	p := pr.p
	id, last, found := pr.levels.leave(e.Process, e.Depth, func(id int32) bool {
		return matchLease(p.at(id).key, p.at(id).Value, e.Key, e.Value)
	})
	if !found {
		return e.Depth > 1 // a level never seen entered (a retry, a retired id's): no hold ends
	}
	if !last {
		return true // an inner level: the hold goes on
	}
	hs := pr.open.At(e.Process)
	for j, o := range hs {
		if o == id {
			releaseHold(p.at(id), e.Time)
			pr.open.Put(e.Process, append(hs[:j], hs[j+1:]...))
			break
		}
	}
	return true
}

// finish completes step 1 once every event has been seen.
func (pr *parser) finish() *parsed {
	p, st := pr.p, pr.st
	nemInflight, byKey, keyCounts := pr.nemInflight, pr.byKey, pr.keyCounts
	expired, noDeadline, strayRelease, strayWork := pr.expired, pr.noDeadline, pr.strayRelease, pr.strayWork
	// Invocations the history ended on are indeterminate, like info, but have no latency.
	var pendingClient int
	pr.inflight.Each(func(_, j int) {
		e := st.at(j)
		pendingClient++
		switch e.F {
		case history.FAcquire:
			p.stats.Acquires.Pending++
			keyCounts(e.Key).Pending++
		case history.FRelease:
			p.stats.Releases.Pending++
		case history.FExtend:
			p.stats.Extends.Pending++
		}
	})
	var pendingNemesis int
	for _, q := range nemInflight {
		for _, j := range q {
			p.nemOps = append(p.nemOps, nemOp{inv: j, comp: -1})
			pendingNemesis++
		}
	}
	sort.Slice(p.nemOps, func(a, b int) bool { return p.nemOps[a].inv < p.nemOps[b].inv })
	sort.SliceStable(p.nemesis, func(a, b int) bool { return st.at(p.nemesis[a]).Time < st.at(p.nemesis[b]).Time })

	p.stats.AcquiresByKey = make(map[string]Counts, len(byKey))
	for k, c := range byKey {
		p.stats.AcquiresByKey[k] = *c
	}
	p.stats.Processes = pr.processes.Len()
	p.stats.Holds = int(p.base) + len(p.holds) - expired
	p.stats.ExpiredOnArrival = expired
	p.stats.Duration = p.last - p.first

	note := func(n int, format string) {
		if n > 0 {
			p.notes = append(p.notes, fmt.Sprintf(format, n))
		}
	}
	note(pendingClient, "%d client operations were still in flight when the history ended; they count as indeterminate")
	note(pendingNemesis, "%d nemesis operations never completed; their faults are taken to last until the end of the history")
	note(noDeadline, "%d ok acquires carried no deadline (a watchdog lock promises none); their holds last until release (or forever)")
	note(expired, "%d ok acquires were expired on arrival (their deadline was at or before their completion): they grant no hold, and work under them is an overrun")
	note(strayRelease, "%d releases matched no open hold of their process")
	note(strayWork, "%d work operations matched no hold of their process")
	return p
}
