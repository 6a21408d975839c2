package results

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/internal/proctable"
)

// collector builds a runData one event at a time. It pairs invokes with completions, and ok
// acquires with the release that ends their hold, by the same rules as the checker (an earlier
// deadline ends the hold; a missing one never does), and hands each acquire, once its outcome and
// hold are known, to the timeline, the latency plot and the rate bins. What it keeps per process
// (the acquire in flight, the holds not yet ended) is gone when the process moves on.
type collector struct {
	d *runData
	// fixed is the configured client count; 0 draws one slot per process (pid), as many as the
	// history has.
	fixed    int
	maxPid   int
	seq      int64 // acquires invoked so far
	inflight inflightSet
	open     proctable.Table[[]*openHold] // pid -> ok acquires whose hold has not ended
	writeInv proctable.Table[int]         // pid -> index into writes
	// nodeFirst orders the nodes that granted leases by the first acquire (in invoke order) and
	// place in its list that named them, as a pass over the acquires in order would meet them.
	nodeFirst map[string][2]int64
	nodeLists map[string][]string // one copy of each list of granting nodes a kept hold names
	keepHolds int8                // 0 undecided, 1 keep ok holds (a resource run), -1 not
	seenPlan  bool
}

// inflightAcq is an acquire invoked and not completed yet; live marks a used entry of a slot.
type inflightAcq struct {
	live bool
	seq  int64
	pid  int
	slot int
	key  string
	inv  int64
}

// openHold is an ok acquire whose hold has not ended yet.
type openHold struct {
	pid, slot  int
	key, value string
	inv, comp  int64
	deadline   int64
	tuple      int // its place in the timeline's exact list, -1 when holds are merged
	hold       int // index into runData.holds, -1 when not kept
}

func newCollector(meta runMeta) *collector {
	d := &runData{meta: meta, offsets: map[string][]offsetPoint{}, tl: newTLBuilder(), lat: newLatencyData()}
	return &collector{d: d, fixed: meta.Clients, inflight: newInflightSet(meta.Clients),
		nodeFirst: map[string][2]int64{}, nodeLists: map[string][]string{}}
}

// slotOf is the slot of process pid: its configured client, or its own lane without a configuration.
func (c *collector) slotOf(pid int) int {
	if c.fixed > 0 {
		return pid % c.fixed
	}
	return pid
}

func (c *collector) event(e *history.Event) {
	d := c.d
	d.end = max(d.end, e.Time)
	if e.Process >= 0 {
		c.maxPid = max(c.maxPid, e.Process)
	}
	switch {
	case e.Plan != nil && !c.seenPlan:
		c.seenPlan = true
		d.meta.fillFromPlan(e.Plan)
	case e.Process == history.NemesisProcess:
		d.nemesisEvent(e)
	case e.Process < 0:
	case e.F == history.FAcquire && e.Type == history.Invoke:
		c.seq++
		c.inflight.put(inflightAcq{seq: c.seq, pid: e.Process, slot: c.slotOf(e.Process), key: e.Key, inv: e.Time, live: true})
		d.rate.invoked(e.Time)
	case e.F == history.FAcquire:
		c.completed(e)
	case e.F == history.FRelease && e.Type == history.Invoke:
		c.endHold(e)
	case e.F == history.FWrite && e.Type == history.Invoke:
		v, _ := strconv.ParseInt(e.Value, 10, 64)
		c.writeInv.Put(e.Process, len(d.writes))
		d.writes = append(d.writes, write{pid: e.Process, slot: c.slotOf(e.Process), key: e.Key, value: v, inv: e.Time, comp: -1})
	case e.F == history.FWrite:
		if i, ok := c.writeInv.Get(e.Process); ok {
			c.writeInv.Delete(e.Process)
			d.writes[i].comp, d.writes[i].accepted = e.Time, e.Type == history.OK
		}
	}
}

// completed takes an acquire's completion: a refusal or an indeterminate result is drawn at once,
// a grant when its hold ends.
func (c *collector) completed(e *history.Event) {
	a, ok := c.inflight.take(e.Process, c.slotOf(e.Process))
	if !ok {
		return // the checker reports a completion without an invoke
	}
	d := c.d
	out := outInfo
	switch e.Type {
	case history.OK:
		out = outOK
	case history.Fail:
		out = outFail
		if e.Reason == history.ReasonError {
			out = outError
		}
	}
	d.lat.add(out, a.inv, e.Time)
	d.rate.completed(out, a.inv)
	switch out {
	case outOK:
		c.granted(a, e)
	case outFail, outError:
		d.tl.fail(a.slot, a.inv, e.Time, out == outError)
	default:
		d.tl.info(a.slot, a.inv, e.Time, false, a.pid)
	}
}

// granted opens the hold of an ok acquire.
func (c *collector) granted(a inflightAcq, e *history.Event) {
	for i, n := range e.Nodes {
		at := [2]int64{a.seq, int64(i)}
		if first, ok := c.nodeFirst[n]; !ok || cmpPos(at, first) < 0 {
			c.nodeFirst[n] = at
		}
	}
	deadline := e.Deadline
	if deadline <= 0 {
		deadline = checker.Never
	}
	h := &openHold{pid: a.pid, slot: a.slot, key: a.key, value: e.Value, inv: a.inv, comp: e.Time, deadline: deadline, hold: -1}
	h.tuple = c.d.tl.okStart(a.slot, a.inv, e.Time, a.pid)
	if c.keepHolds == 0 {
		// A run with a protected resource draws its stale writes beside the holds around them; a
		// mutex run has none, and keeps no hold past its end.
		c.keepHolds = 1
		if c.d.meta.Workload == "mutex" {
			c.keepHolds = -1
		}
	}
	if c.keepHolds > 0 {
		h.hold = len(c.d.holds)
		c.d.holds = append(c.d.holds, okHold{pid: a.pid, key: a.key, inv: a.inv, comp: e.Time, holdEnd: e.Time, nodes: c.nodeList(e.Nodes)})
	}
	c.open.Put(a.pid, append(c.open.At(a.pid), h))
}

func cmpPos(a, b [2]int64) int {
	if a[0] != b[0] {
		return cmp.Compare(a[0], b[0])
	}
	return cmp.Compare(a[1], b[1])
}

// endHold ends the latest open hold of the process that the release names.
func (c *collector) endHold(e *history.Event) {
	hs := c.open.At(e.Process)
	for j := len(hs) - 1; j >= 0; j-- {
		h := hs[j]
		if (e.Key != "" && e.Key != h.key) || (e.Value != "" && h.value != "" && e.Value != h.value) {
			continue
		}
		end, by := e.Time, endRelease
		if h.deadline < e.Time {
			end, by = h.deadline, endExpiry
		}
		c.ended(h, max(end, h.comp), by)
		hs = append(hs[:j], hs[j+1:]...)
		if len(hs) == 0 {
			c.open.Delete(e.Process)
		} else {
			c.open.Put(e.Process, hs)
		}
		return
	}
}

func (c *collector) ended(h *openHold, end int64, by byte) {
	c.d.tl.okEnd(h.slot, h.tuple, h.inv, h.comp, end, by, h.pid)
	if h.hold >= 0 {
		c.d.holds[h.hold].holdEnd = end
	}
}

// finish closes what the history left open (pending acquires, holds never released) and completes
// the data with what only the checked result knows: the fault windows.
func (c *collector) finish(res *checker.Result) *runData {
	d := c.d
	d.clients = c.fixed
	if d.clients <= 0 {
		d.clients = c.maxPid + 1
	}
	for _, a := range c.inflight.sorted() {
		d.tl.info(a.slot, a.inv, d.end, true, a.pid)
	}
	c.open.Each(func(_ int, hs []*openHold) {
		for _, h := range hs {
			end, by := min(h.deadline, d.end), endOpen
			if h.deadline <= d.end {
				by = endExpiry
			}
			c.ended(h, end, by)
		}
	})
	leaseNodes := make([]string, 0, len(c.nodeFirst))
	for n := range c.nodeFirst {
		leaseNodes = append(leaseNodes, n)
	}
	slices.SortFunc(leaseNodes, func(a, b string) int { return cmpPos(c.nodeFirst[a], c.nodeFirst[b]) })
	d.nodes = nodesOf(res.Faults, leaseNodes)
	d.rate.extend(d.end)
	return d
}

// inflightSet holds the acquires in flight: one per slot where the run's clients are known (a slot's
// worker asks one thing at a time), in a map otherwise and for any other.
type inflightSet struct {
	bySlot []inflightAcq
	other  proctable.Table[inflightAcq]
}

func newInflightSet(clients int) inflightSet {
	return inflightSet{bySlot: make([]inflightAcq, max(clients, 0))}
}

func (s *inflightSet) put(a inflightAcq) {
	if a.slot < len(s.bySlot) && (!s.bySlot[a.slot].live || s.bySlot[a.slot].pid == a.pid) {
		s.bySlot[a.slot] = a
		return
	}
	s.other.Put(a.pid, a)
}

func (s *inflightSet) take(pid, slot int) (inflightAcq, bool) {
	if a, ok := s.other.Get(pid); ok {
		s.other.Delete(pid)
		return a, true
	}
	if slot < len(s.bySlot) && s.bySlot[slot].live && s.bySlot[slot].pid == pid {
		a := s.bySlot[slot]
		s.bySlot[slot].live = false
		return a, true
	}
	return inflightAcq{}, false
}

// sorted lists the acquires in flight in the order they were invoked.
func (s *inflightSet) sorted() []inflightAcq {
	out := make([]inflightAcq, 0, s.other.Len())
	for _, a := range s.bySlot {
		if a.live {
			out = append(out, a)
		}
	}
	s.other.Each(func(_ int, a inflightAcq) { out = append(out, a) })
	slices.SortFunc(out, func(a, b inflightAcq) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// nodeList returns the one kept copy of a list of granting nodes.
func (c *collector) nodeList(ns []string) []string {
	if len(ns) == 0 {
		return nil
	}
	k := strings.Join(ns, "\x00")
	if l, ok := c.nodeLists[k]; ok {
		return l
	}
	l := slices.Clone(ns)
	c.nodeLists[k] = l
	return l
}

func (d *runData) slotOf(pid int) int { return pid % d.clients }

func (d *runData) nemesisEvent(e *history.Event) {
	for n, off := range e.Offsets {
		d.offsets[n] = append(d.offsets[n], offsetPoint{t: e.Time, offset: off, measured: e.Type != history.Invoke})
	}
}
