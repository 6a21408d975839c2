package checker

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strings"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/internal/proctable"
)

// Culprit kinds, as Culprit.Kind names them.
const (
	// CulpritLateRelease: a release that succeeded after its own lease had ended, while another
	// client held the key.
	CulpritLateRelease = "late-release"
	// CulpritKeptKey: a release that succeeded but left the key set: an acquire asked after it, and
	// before the released lease would have ended, was refused as held while no other lease could
	// hold the key.
	CulpritKeptKey = "kept-key"
	// CulpritSharedValue: two processes were granted leases of one key with one value, which the
	// lock's compare-and-delete and compare-and-renew cannot tell apart.
	CulpritSharedValue = "shared-value"
)

// Culprit is an operation that acted, or may have acted, on a lease that was not its own. None
// makes a verdict invalid by itself: each has an innocent reading under the checker's semantics (a
// release that answers ok and does nothing lies but harms no one; a Redlock release may delete
// only its own key on the nodes that still had it; a shared value harms only when one of the two
// acts late). What they do is explain: a violation no fault explains names the culprit that made
// it possible (Violation.Cause), and each is listed as a warning.
type Culprit struct {
	Kind    string `json:"kind"`
	Key     string `json:"key"`
	Process int    `json:"process"`
	// F is the culprit's operation (release, or acquire for a shared value); Invoke and Completed
	// its times; Deadline the end of the culprit's own lease (for a kept key, the latest its key
	// would have lasted had the release done nothing) and Past how long after it the operation was
	// invoked (late releases).
	F         string `json:"f"`
	Value     string `json:"value,omitempty"`
	Invoke    int64  `json:"invoke"`
	Completed int64  `json:"completed"`
	Deadline  int64  `json:"deadline,omitempty"`
	Past      int64  `json:"past,omitempty"`
	// Other is the process whose lease the operation may have acted on (the live holder, the
	// refused acquirer, the process sharing the value), granted or refused at OtherAt.
	Other   int   `json:"other"`
	OtherAt int64 `json:"other_at"`
	// Cause names the faults in effect around it, or "no fault".
	Cause       string `json:"cause,omitempty"`
	Description string `json:"description"`
}

// relOp is an ok release (step 1), kept so that late releases and releases of another's value can
// be named once the holds are known. There is one per ok release, so it is 40 bytes: the key and
// value are its hold's, and only a release that named no hold keeps its own (in culprits.foreign).
type relOp struct {
	hold    int32 // the released hold, -1 when the release named no hold of its process
	foreign int32 // for hold -1, its key and value's place in culprits.foreign
	process int32
	// named: a fold already counted it among the late releases, and named it if it was one.
	named     bool
	inv, comp int64
	deadline  int64 // the released lease's deadline, renewals included (Never: none)
}

// relKey and relValue are the key and value the release o acted on.
func (c *culprits) relKey(p *parsed, o *relOp) string {
	if o.hold >= 0 {
		return p.at(o.hold).key
	}
	return c.foreign[o.foreign].key
}

func (c *culprits) relValue(p *parsed, o *relOp) string {
	if o.hold >= 0 {
		return p.at(o.hold).Value
	}
	return c.foreign[o.foreign].value
}

// late reports whether the release was sent after its own lease had ended.
func (o *relOp) late() bool { return o.hold >= 0 && o.deadline != Never && o.inv > o.deadline }

// keyTrack is what culprits follows of one key while the history streams past, to tell a refusal
// that only a kept key explains.
type keyTrack struct {
	inflight int     // acquires of the key invoked and not completed
	live     []int32 // granted holds whose key may still be on the servers
	pruned   int     // len(live) after its last pruning, so pruning stays amortized O(1) a grant
	// last is the latest ok release of the key (if hasLast), reported once it kept the key; a copy,
	// so that folding the list of releases (fold.go) leaves it.
	last     relOp
	hasLast  bool
	reported bool
	// stray is until when a key set by an acquire that failed or timed out may still exist.
	stray int64
	// nodes is the one node every grant of the key named, "" before the first grant, "*" when
	// grants named several nodes or none: then a refused acquire may itself have set the key on
	// some nodes for a while (a Redlock round undone).
	nodes string
}

// culprits is step 1's bookkeeping for the Culprit findings and the edges a run exercised; the
// parser calls it at each client event. It keeps a few facts per key and process, and one record
// per ok release.
type culprits struct {
	st       *store
	planRead bool
	ttl      int64 // the plan's TTL, 0 when the history has none
	expiry   int64 // the plan's expiry (a watchdog's timeout), 0 when none
	keys     map[string]*keyTrack
	releases []relOp
	foreign  []keyValue // of the releases that named no hold of their process
	kept     []Culprit
	// lastInfo is, per process, its latest acquire that timed out (info); priorInfo, per grant
	// (process, completion), the invoke of such an acquire of the same key before it.
	lastInfo  proctable.Table[keyTime]
	lastKey   lastKey[keyTrack]
	priorInfo map[[2]int64]int64
	// nearExtends counts extends sent in the last tenth of their lease's validity or after it.
	nearExtends int
}

// keyValue is a lease's key and value as a release named them.
type keyValue struct{ key, value string }

// keyTime is an operation's key and invoke time.
type keyTime struct {
	key string
	inv int64
}

func newCulprits(st *store) *culprits {
	return &culprits{st: st, keys: map[string]*keyTrack{}, priorInfo: map[[2]int64]int64{}}
}

// plan reads the TTL from the run's plan, on the first event (kept for good by a streaming store).
func (c *culprits) plan() {
	if c.planRead || c.st.n == 0 {
		return
	}
	c.planRead = true
	if pl := c.st.at(0).Plan; pl != nil {
		c.ttl, c.expiry = pl.TTL, pl.Expiry
	}
}

func (c *culprits) key(k string) *keyTrack {
	return c.lastKey.get(c.keys, k, func() *keyTrack { return &keyTrack{} })
}

// invoked sees a client invoke.
func (c *culprits) invoked(e *history.Event) {
	c.plan()
	if e.F == history.FAcquire {
		c.key(e.Key).inflight++
	}
}

// acquired sees the completion e of an acquire of key invoked at inv, before any hold is made of it.
func (c *culprits) acquired(p *parsed, key string, inv, e *history.Event) {
	t := c.key(key)
	t.inflight = max(t.inflight-1, 0)
	switch e.Type {
	case history.Info:
		// Its key may land late and last a lease: until when nobody can say without a TTL.
		t.stray = max(t.stray, c.after(e.Time))
		c.lastInfo.Put(e.Process, keyTime{key, inv.Time})
	case history.Fail:
		// A refusal by a lock of one node set nothing; one by a lock of several may have set the
		// key on some nodes and undone it, and an error may have left it there.
		if t.nodes == "" || t.nodes == "*" {
			if e.Reason == history.ReasonHeld {
				t.stray = max(t.stray, e.Time)
			} else {
				t.stray = max(t.stray, c.after(e.Time))
			}
		}
		if e.Reason == history.ReasonHeld {
			c.refused(p, t, key, inv, e)
		}
	case history.OK:
		if li, ok := c.lastInfo.Get(e.Process); ok && li.key == key {
			c.priorInfo[[2]int64{int64(e.Process), e.Time}] = li.inv
		}
	}
}

// after is until when a key set by an operation ending at t may exist: a lease (the TTL, or a
// watchdog's timeout) later, or for ever when the history has no plan to say how long a lease is.
func (c *culprits) after(t int64) int64 {
	if c.ttl <= 0 {
		return Never
	}
	return t + max(c.ttl, c.expiry)
}

// granted sees the new hold id (an ok acquire that was no re-entry).
func (c *culprits) granted(p *parsed, id int32) {
	h := p.at(id)
	t := c.key(h.key)
	n := "*"
	if len(h.nodes()) == 1 {
		n = h.nodes()[0]
	}
	switch t.nodes {
	case "":
		t.nodes = n
	case n:
	default:
		t.nodes = "*"
	}
	if len(t.live) >= 2*t.pruned+64 {
		// Leases that expired unreleased would otherwise pile up, and every release scans them.
		t.live = slices.DeleteFunc(t.live, func(o int32) bool { return c.horizon(p.at(o))+int64(60e9) < h.Start })
		t.pruned = len(t.live)
	}
	t.live = append(t.live, id)
}

// horizon is until when the key of hold h may exist if nobody deleted it.
func (c *culprits) horizon(h *hold) int64 {
	if h.Deadline == Never {
		return Never
	}
	return max(c.after(max(h.Deadline, h.Start)), h.Deadline)
}

// leaseOp sees the completion e of a release or extend invoked at inv, recent being its process's
// latest holds, before the parser applies it.
func (c *culprits) leaseOp(p *parsed, recent []int32, inv, e *history.Event) {
	k := findLease(len(recent), func(k int) *hold { return p.at(recent[k]) }, inv.Key, inv.Value)
	if e.F == history.FExtend {
		if k >= 0 {
			h := p.at(recent[k])
			if h.Deadline != Never && 10*(h.Deadline-inv.Time) <= h.granted-h.Start {
				c.nearExtends++
			}
		}
		return
	}
	if e.Type != history.OK || inv.Depth > 1 {
		return // a failed release changed nothing; an inner level of a reentrant hold frees nothing
	}
	op := relOp{hold: -1, process: int32(e.Process), inv: inv.Time, comp: e.Time, deadline: Never}
	if k < 0 {
		op.foreign = int32(len(c.foreign))
		c.foreign = append(c.foreign, keyValue{inv.Key, inv.Value})
	} else {
		h := p.at(recent[k])
		op.hold, op.deadline = recent[k], h.Deadline
		t := c.key(h.key)
		t.live = slices.DeleteFunc(t.live, func(id int32) bool { return id == recent[k] })
		t.last, t.hasLast, t.reported = op, true, false
	}
	c.releases = append(c.releases, op)
}

// refused judges a refusal e (reason held) of an acquire invoked at inv: when the latest ok
// release of the key completed before it was asked, the released lease would still have held the
// key, and no other lease, acquire in flight or acquire of unknown outcome could hold it, the
// release left the key behind.
func (c *culprits) refused(p *parsed, t *keyTrack, key string, inv, e *history.Event) {
	if !t.hasLast || t.reported || t.inflight > 0 || t.stray > inv.Time {
		return
	}
	op := &t.last
	h := p.at(op.hold)
	// Had the release done nothing, the key would surely still be there until the lease's
	// deadline, and until a TTL after it was asked for.
	until := h.Deadline
	if c.ttl > 0 {
		until = max(until, h.Invoke+c.ttl)
	}
	if op.comp >= inv.Time || inv.Time >= until {
		return
	}
	t.live = slices.DeleteFunc(t.live, func(id int32) bool { return c.horizon(p.at(id))+int64(60e9) < e.Time })
	for _, id := range t.live {
		if c.horizon(p.at(id)) > inv.Time {
			return
		}
	}
	t.reported = true
	c.kept = append(c.kept, Culprit{
		Kind: CulpritKeptKey, Key: key, Process: int(op.process), F: history.FRelease, Value: c.relValue(p, op),
		Invoke: op.inv, Completed: op.comp, Deadline: until, Other: e.Process, OtherAt: inv.Time,
	})
}

// nameCulprits lists the culprits once the holds, faults and violations are known (step 6f), adds
// the live holder to late extends and stale writes, and names the culprit of every listed violation
// that no fault explains.
func (r *Result) nameCulprits(p *parsed, limit int) {
	c := p.cul
	_, byKey := keyOrder(p.holds)
	ix := holdIndex{holds: p.holds, byKey: byKey}
	var found []Culprit
	fs := p.folded
	if fs != nil {
		// Named when their releases were folded, which came before every release still listed.
		r.LateReleaseCount += fs.lateN
		for _, l := range fs.late {
			found = append(found, describeLateRelease(l.u, r.Faults, l.holdInvoke))
		}
	}
	for i := range c.releases {
		op := &c.releases[i]
		if op.named || !op.late() {
			continue
		}
		r.LateReleaseCount++
		key := c.relKey(p, op)
		if o := ix.holderDuring(key, int(op.process), op.inv, op.comp); o != nil {
			u := Culprit{Kind: CulpritLateRelease, Key: key, Process: int(op.process), F: history.FRelease, Value: c.relValue(p, op),
				Invoke: op.inv, Completed: op.comp, Deadline: op.deadline, Past: op.inv - op.deadline, Other: o.Process, OtherAt: o.Start}
			found = append(found, describeLateRelease(u, r.Faults, p.at(op.hold).Invoke))
		}
	}
	for _, u := range c.kept {
		u.Cause = faultsBetween(r.Faults, u.Invoke, u.OtherAt)
		u.Description = fmt.Sprintf("key %s: p%d's release at %s succeeded, yet p%d's acquire at %s, before p%d's lease would have ended at %s, was refused as held while no other lease could hold the key: the release did not take the lock away from p%d; faults: %s",
			u.Key, u.Process, FormatTime(u.Invoke), u.Other, FormatTime(u.OtherAt), u.Process, FormatTime(u.Deadline), u.Process, u.Cause)
		found = append(found, u)
	}
	var shared shared
	if fs != nil {
		fs.values.addAll(p.holds)
		shared = fs.values.shared()
	} else {
		shared = sharedValues(p.holds)
	}
	for _, u := range shared.found {
		found = append(found, u)
	}
	slices.SortStableFunc(found, func(a, b Culprit) int { return cmp.Compare(a.Invoke, b.Invoke) })
	r.CulpritCount = len(found)
	for _, u := range found {
		if u.Kind == CulpritLateRelease {
			r.lateWhileHeld++
		}
	}
	r.Culprits = found[:min(len(found), limit)]

	for i := range r.LateExtends {
		l := &r.LateExtends[i]
		var at holderAt
		if fs != nil && i < len(fs.holders) {
			at = fs.holders[i] // found at a fold, while the holds it may name were there
		} else if o := ix.holderDuring(l.Key, l.Process, l.Invoke, l.Completed); o != nil {
			at = holderAt{ok: true, process: o.Process, start: o.Start}
		}
		if at.ok {
			l.Description += fmt.Sprintf(" while p%d held the key (granted at %s)", at.process, FormatTime(at.start))
		}
	}
	if r.Resource != nil {
		for i := range r.Resource.StaleWrites {
			sw := &r.Resource.StaleWrites[i]
			if o := ix.holderDuring(sw.Key, sw.Process, sw.Invoke, sw.Invoke); o != nil && sw.Past > 0 {
				sw.Holder, sw.HolderAt = fmt.Sprintf("p%d", o.Process), o.Start
				sw.Description = describeStale(sw)
			}
		}
	}
	for i := range r.Violations {
		v := &r.Violations[i]
		if !r.faultFree(v) {
			continue
		}
		if what := c.culpritOf(p, &shared, r.pairs[i]); what != "" {
			v.Culprit = what
			v.Cause = strings.TrimSuffix(what+"; "+v.Cause, "; ")
		}
	}
}

// describeLateRelease gives the late release u, whose lease was asked for at holdInvoke, its
// cause and description.
func describeLateRelease(u Culprit, faults []FaultWindow, holdInvoke int64) Culprit {
	u.Cause = faultsBetween(faults, holdInvoke, u.Completed)
	u.Description = fmt.Sprintf("key %s: p%d's release at %s, %s after its lease ended at %s, succeeded while p%d held the key (granted at %s): it probably deleted p%d's key; faults: %s",
		u.Key, u.Process, FormatTime(u.Invoke), FormatSpan(u.Past), FormatTime(u.Deadline), u.Other, FormatTime(u.OtherAt), u.Other, u.Cause)
	return u
}

// faultFree reports whether no fault explains violation v: none was in effect from the first ask
// to the last grant, or the nodes that granted both leases were hit by none.
func (r *Result) faultFree(v *Violation) bool {
	if strings.Contains(v.Cause, "no fault hit") {
		return true
	}
	from, to := min(v.A.Invoke, v.B.Invoke), max(v.A.Start, v.B.Start)
	return faultsBetween(r.Faults, from, to) == "no fault"
}

// holdIndex finds holds of a key by time.
type holdIndex struct {
	holds []hold
	byKey map[string][]int32 // sorted by start (holds are made in completion order)
}

// holderLookback bounds how many earlier holds holderDuring looks at: enough for any lease that is
// still held, and constant however long the run.
const holderLookback = 512

// holderDuring returns the latest hold of key by another process than process that was in effect
// at some moment of [from, to], or nil.
func (ix holdIndex) holderDuring(key string, process int, from, to int64) *HoldInfo {
	ids := ix.byKey[key]
	j := sort.Search(len(ids), func(j int) bool { return ix.holds[ids[j]].Start > to })
	for k := j - 1; k >= 0 && k >= j-holderLookback; k-- {
		h := &ix.holds[ids[k]]
		if h.Process != process && h.End > from {
			hi := h.info()
			return &hi
		}
	}
	return nil
}

// shared is what sharedValues found: the culprits, and the processes granted each shared value.
type shared struct {
	found []Culprit
	by    map[[2]string][]int
}

// sharedValues finds leases of one key granted with one value to different processes (step 6f).
func sharedValues(holds []hold) shared {
	out := shared{by: map[[2]string][]int{}}
	for _, ids := range sameValueGroups(holds) {
		a := &holds[ids[0]]
		for _, id := range ids[1:] {
			b := &holds[id]
			if b.Process == a.Process {
				continue
			}
			kv := [2]string{a.key, a.Value}
			for _, m := range ids {
				if pid := holds[m].Process; !slices.Contains(out.by[kv], pid) {
					out.by[kv] = append(out.by[kv], pid)
				}
			}
			out.found = append(out.found, Culprit{Kind: CulpritSharedValue, Key: a.key, Process: a.Process, F: history.FAcquire, Value: a.Value,
				Invoke: a.Invoke, Completed: a.Start, Other: b.Process, OtherAt: b.Start,
				Description: fmt.Sprintf("key %s: p%d and p%d were both granted value %s (at %s and %s): the lock cannot tell their leases apart; a late release or extend by one acts on the other's",
					a.key, a.Process, b.Process, a.Value, FormatTime(a.Start), FormatTime(b.Start))})
			break
		}
	}
	return out
}

// sameValueGroups are the holds with a value that share their key and value with another hold:
// each group in increasing order of hold, the groups in order of key, then value. Holds are first
// sorted by a hash of key and value (16 bytes each, no string compared, no hold read again: a
// 10-minute run at the ceiling has 1.7 million holds, most with a value of their own), and only the
// holds whose hash repeats are compared by their strings.
func sameValueGroups(holds []hold) [][]int32 {
	type hashed struct {
		h  uint64
		id int32
	}
	seed := maphash.MakeSeed()
	var hs []hashed
	for i := range holds {
		if h := &holds[i]; h.Value != "" {
			var mh maphash.Hash
			mh.SetSeed(seed)
			mh.WriteString(h.key)
			mh.WriteByte(0)
			mh.WriteString(h.Value)
			hs = append(hs, hashed{mh.Sum64(), int32(i)})
		}
	}
	slices.SortFunc(hs, func(a, b hashed) int { return cmp.Or(cmp.Compare(a.h, b.h), cmp.Compare(a.id, b.id)) })
	var groups [][]int32
	for s := 0; s < len(hs); {
		e := s + 1
		for e < len(hs) && hs[e].h == hs[s].h {
			e++
		}
		if e-s > 1 {
			// A run of one hash: its holds by key and value (stable: each group stays in hold order).
			run := make([]int32, 0, e-s)
			for _, x := range hs[s:e] {
				run = append(run, x.id)
			}
			slices.SortStableFunc(run, func(a, b int32) int { return compareKeyValue(&holds[a], &holds[b]) })
			for i := 0; i < len(run); {
				j := i + 1
				for j < len(run) && compareKeyValue(&holds[run[i]], &holds[run[j]]) == 0 {
					j++
				}
				if j-i > 1 {
					groups = append(groups, run[i:j])
				}
				i = j
			}
		}
		s = e
	}
	slices.SortFunc(groups, func(a, b []int32) int { return compareKeyValue(&holds[a[0]], &holds[b[0]]) })
	return groups
}

func compareKeyValue(a, b *hold) int {
	return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.Value, b.Value))
}

// culpritOf names the operation that made the second grant of the overlapping holds a and b
// possible, or "". The first holder's key was gone when the second was granted: either another
// process's operation removed it (a late release, a release of the first holder's value, a
// release of a lock it did not hold, a late extend), or the first holder's promise outlived its
// key (an acquire that came back ok after its own timed-out attempt, a deadline further than the
// TTL asked for, a value granted to others too). A folded pair was asked culpritNow at its fold.
func (c *culprits) culpritOf(p *parsed, sh *shared, lp listedPair) string {
	now := lp.culprit
	if lp.seg >= 0 {
		now = c.culpritNow(p, lp.a, lp.b)
	}
	if now != "" {
		return now
	}
	first, _ := c.ordered(p, lp.a, lp.b)
	return sharedValue(first, sh)
}

// culpritNow is culpritOf without the shared values: what the releases, extends and acquires
// around the pair tell, which a fold must ask before it lets them go.
func (c *culprits) culpritNow(p *parsed, a, b int32) string {
	first, second := c.ordered(p, a, b)
	if what := c.remover(p, first, second); what != "" {
		return what
	}
	return c.promise(first, second)
}

// ordered is the pair's holds, the one granted first first.
func (c *culprits) ordered(p *parsed, a, b int32) (first, second *hold) {
	first, second = p.at(a), p.at(b)
	if second.Start < first.Start {
		first, second = second, first
	}
	return first, second
}

// remover is the latest operation of another process that may have deleted first's key before
// second was granted.
func (c *culprits) remover(p *parsed, first, second *hold) string {
	var best, fallback string
	bestAt := int64(-1)
	when := func(comp int64) string {
		if gap := second.Start - comp; gap >= 0 {
			return fmt.Sprintf("%s before p%d was granted", FormatSpan(gap), second.Process)
		}
		return fmt.Sprintf("while p%d's acquire was under way", second.Process)
	}
	j := sort.Search(len(c.releases), func(j int) bool { return c.releases[j].comp > first.Invoke })
	for ; j < len(c.releases) && c.releases[j].inv < second.Start+int64(60e9); j++ {
		op := &c.releases[j]
		if c.relKey(p, op) != first.key || int(op.process) == first.Process || op.inv >= second.Start || op.inv <= bestAt {
			continue
		}
		var what string
		switch {
		case op.late():
			what = fmt.Sprintf("p%d's release at %s, %s after its lease ended at %s, deleted p%d's key %s",
				op.process, FormatTime(op.inv), FormatSpan(op.inv-op.deadline), FormatTime(op.deadline), first.Process, when(op.comp))
		case op.hold < 0:
			what = fmt.Sprintf("p%d's release at %s, of a lock it did not hold, was accepted and deleted p%d's key %s",
				op.process, FormatTime(op.inv), first.Process, when(op.comp))
		case c.relValue(p, op) != "" && c.relValue(p, op) == first.Value:
			what = fmt.Sprintf("p%d's release at %s named value %s, which the lock had granted p%d too: it deleted p%d's key %s",
				op.process, FormatTime(op.inv), first.Value, first.Process, first.Process, when(op.comp))
		case op.inv >= first.Start:
			// Sent once first's grant was complete, an ok release of another value found first's
			// key on the servers, which a lock that checks the value before deleting refuses.
			// Named only when nothing more telling is found.
			fallback = fmt.Sprintf("p%d's release at %s, of its own lease, succeeded while p%d held the key (granted at %s) and deleted it %s",
				op.process, FormatTime(op.inv), first.Process, FormatTime(first.Start), when(op.comp))
			continue
		default:
			continue
		}
		best, bestAt = what, op.inv
	}
	for _, l := range p.lateExtends {
		if l.Key != first.key || l.Process == first.Process || l.Completed <= first.Invoke || l.Invoke >= second.Start || l.Invoke <= bestAt || l.Deadline == 0 {
			continue
		}
		best = fmt.Sprintf("p%d's extend at %s, %s after its lease ended at %s, succeeded on the key p%d held, %s",
			l.Process, FormatTime(l.Invoke), FormatSpan(l.Invoke-l.Deadline), FormatTime(l.Deadline), first.Process, when(l.Completed))
		bestAt = l.Invoke
	}
	if best == "" {
		return fallback
	}
	return best
}

// promiseSlack is how far a deadline may lie beyond the invoke plus the TTL before the promise
// counts as longer than the TTL: the harness stamps the invoke before the lock reads its clock.
const promiseSlack = int64(1e6)

// promise names how first's promise outlived its key, when second was granted after the key could
// have expired.
func (c *culprits) promise(first, second *hold) string {
	if inv, ok := c.priorInfo[[2]int64{int64(first.Process), first.Start}]; ok && (c.ttl <= 0 || second.Start >= inv+c.ttl) {
		return fmt.Sprintf("p%d's acquire at %s came back ok after its own acquire of the key at %s had timed out: it may have found that attempt's key, which can expire before the deadline %s it promised; p%d was granted at %s",
			first.Process, FormatTime(first.Invoke), FormatTime(inv), FormatTime(first.granted), second.Process, FormatTime(second.Start))
	}
	if c.ttl > 0 && first.granted != Never && first.granted-first.Invoke > c.ttl+promiseSlack && second.Start >= first.Invoke+c.ttl {
		took, fromGrant := first.Start-first.Invoke, first.granted-first.Start
		if took > 0 && fromGrant >= c.ttl-took/2 {
			return fmt.Sprintf("p%d's acquire took %s (asked at %s, granted at %s) and was promised %s from its grant, with a TTL of %s: the time the acquire took was not subtracted, so its key could expire from %s on, before its deadline %s; p%d was granted at %s",
				first.Process, FormatSpan(took), FormatTime(first.Invoke), FormatTime(first.Start), FormatSpan(fromGrant), FormatSpan(c.ttl),
				FormatTime(first.Invoke+c.ttl), FormatTime(first.granted), second.Process, FormatTime(second.Start))
		}
		return fmt.Sprintf("p%d's lease was promised until %s, %s after it was asked for at %s with a TTL of %s: its key could expire from %s on; p%d was granted at %s",
			first.Process, FormatTime(first.granted), FormatSpan(first.granted-first.Invoke), FormatTime(first.Invoke), FormatSpan(c.ttl),
			FormatTime(first.Invoke+c.ttl), second.Process, FormatTime(second.Start))
	}
	return ""
}

// sharedValue names the others first's value was granted to too, if any.
func sharedValue(first *hold, sh *shared) string {
	if ps := sh.by[[2]string{first.key, first.Value}]; len(ps) > 1 {
		var others []string
		for _, pid := range ps {
			if pid != first.Process {
				others = append(others, fmt.Sprintf("p%d", pid))
			}
		}
		return fmt.Sprintf("p%d's value %s was granted to %s too: a release or extend of theirs may have acted on p%d's key", first.Process, first.Value, strings.Join(others, ", "), first.Process)
	}
	return ""
}

// summarizeCulprits writes the culprits into the summary.
func (r *Result) summarizeCulprits(b *strings.Builder, show int) {
	if r.CulpritCount > 0 {
		fmt.Fprintf(b, "culprits: %d operations that acted, or may have acted, on another client's lease (warnings: none makes the verdict invalid by itself; they name the cause of violations no fault explains):\n", r.CulpritCount)
		listLines(b, len(r.Culprits), r.CulpritCount, show, func(i int) string { return r.Culprits[i].Kind + ": " + r.Culprits[i].Description })
	}
	if r.LateReleaseCount > 0 {
		fmt.Fprintf(b, "releases accepted after their lease had ended: %d (%d while another client held the key); a correct lock's release of its own key may succeed a little after the deadline it promised, which is why this alone is no finding\n", r.LateReleaseCount, r.lateWhileHeld)
	}
}
