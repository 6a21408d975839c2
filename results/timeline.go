package results

import (
	"fmt"
	"slices"
	"sort"

	"github.com/lockpick-dev/lockpick/checker"
)

// tlData is the whole run as the report's zoomable timeline draws it: one lane per client slot.
// Times are microseconds on the run clock; each slot's lists are flat arrays of fixed-size tuples,
// the first field of each tuple a delta from the previous tuple's, which keeps a run of 100 clients
// over a minute to a few megabytes (the page decodes them, see report.js).
type tlData struct {
	End     int64     `json:"end"`
	Clients int       `json:"clients"`
	Nodes   []tlNode  `json:"nodes"`
	Faults  []tlFault `json:"faults"`
	Slots   []tlSlot  `json:"slots"`
	Marks   []tlMark  `json:"marks"`
	Viol    []tlViol  `json:"viol"`
	// Bin is the width of the bins failed acquires are counted in when there were too many to draw
	// one by one (0: every one is drawn); MergeGap the gap under which a slot's holds were merged.
	Bin      int64    `json:"bin"`
	MergeGap int64    `json:"mergeGap"`
	Notes    []string `json:"notes"`
}

// tlSlot holds, as flat tuples:
//
//	ok:   invoke delta, latency, hold length, ended by (0 release, 1 expiry, 2 open, 3 merged), process (count when merged)
//	fail: invoke delta, latency, code (0 held or no reason, 1 error)  — binned: bin delta, count, code
//	info: invoke delta, latency, pending (0 or 1), process
type tlSlot struct {
	OK   []int64 `json:"ok"`
	Fail []int64 `json:"fail"`
	Info []int64 `json:"info"`
}

type tlNode struct {
	Name string `json:"name"`
	// Offsets are [time, offset ns, measured 0/1] from clock nemesis events.
	Offsets [][3]int64 `json:"offsets,omitempty"`
}

type tlFault struct {
	S     int64    `json:"s"`
	E     int64    `json:"e"`
	Name  string   `json:"name"`
	Nodes []string `json:"nodes"`
	// Slots are the client slots a client fault (client-pause) hit.
	Slots  []int `json:"slots,omitempty"`
	Healed bool  `json:"healed"`
}

type tlMark struct {
	Slot int    `json:"slot"`
	T    int64  `json:"t"`
	Kind string `json:"kind"`
	Text string `json:"text"`
}

type tlViol struct {
	A    [3]int64 `json:"a"` // slot, start, end
	B    [3]int64 `json:"b"`
	S    int64    `json:"s"`
	E    int64    `json:"e"`
	Text string   `json:"text"`
}

// Bounds that keep the page small; past them the timeline aggregates.
const (
	maxExactFails = 30000
	failBins      = 1500
	maxExactOK    = 80000
	maxMarks      = 5000
)

func us(ns int64) int64 { return ns / 1000 }

// timelineData encodes the run for the page.
func timelineData(res *checker.Result, d *runData) tlData {
	t := tlData{End: us(d.end), Clients: d.clients, Slots: make([]tlSlot, d.clients), Notes: []string{}}
	// Node lanes in the order people count them (n1 above n2), as a finding's node lanes are.
	for _, n := range slices.SortedFunc(slices.Values(d.nodes), naturalLess) {
		node := tlNode{Name: n}
		for _, p := range d.offsets[n] {
			node.Offsets = append(node.Offsets, [3]int64{us(p.t), p.offset, b2i(p.measured)})
		}
		t.Nodes = append(t.Nodes, node)
	}
	for _, f := range res.Faults {
		tf := tlFault{S: us(f.Start), E: us(f.End), Name: faultName(f), Nodes: f.Nodes, Healed: f.Healed}
		for _, n := range f.Nodes {
			if pid, ok := clientTarget(n); ok {
				tf.Slots = append(tf.Slots, d.slotOf(pid))
			}
		}
		t.Faults = append(t.Faults, tf)
	}
	d.tl.encode(&t, us(d.end))
	t.Marks = marks(res, d)
	if len(t.Marks) > maxMarks {
		t.Notes = append(t.Notes, fmt.Sprintf("%d marks, the first %d drawn", len(t.Marks), maxMarks))
		t.Marks = t.Marks[:maxMarks]
	}
	for _, v := range res.Violations {
		t.Viol = append(t.Viol, tlViol{
			A: [3]int64{int64(d.slotOf(v.A.Process)), us(v.A.Start), us(clampEnd(v.A.End, d))},
			B: [3]int64{int64(d.slotOf(v.B.Process)), us(v.B.Start), us(clampEnd(v.B.End, d))},
			S: us(v.OverlapStart), E: us(v.OverlapEnd), Text: v.Description,
		})
	}
	return t
}

func faultName(f checker.FaultWindow) string {
	if f.F != "" && f.F != f.Fault {
		return f.Fault + " " + f.F
	}
	return f.Fault
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// marks are the places the timeline flags: overruns, early lease losses, late extends, stale writes,
// lost updates, token regressions.
func marks(res *checker.Result, d *runData) []tlMark {
	var out []tlMark
	for _, o := range res.Overruns {
		out = append(out, tlMark{Slot: d.slotOf(o.Process), T: us(o.WorkEnd), Kind: "overrun", Text: o.Description})
	}
	for _, l := range res.EarlyLosses {
		out = append(out, tlMark{Slot: d.slotOf(l.Process), T: us(l.Completed), Kind: "early", Text: l.Description})
	}
	for _, l := range res.LateExtends {
		out = append(out, tlMark{Slot: d.slotOf(l.Process), T: us(l.Completed), Kind: "late", Text: l.Description})
	}
	if lv := res.Liveness; lv != nil {
		for _, f := range lv.Findings {
			out = append(out, tlMark{Slot: 0, T: us(f.From), Kind: "deadlock", Text: f.Description})
		}
	}
	for _, t := range res.TokenRegressions {
		out = append(out, tlMark{Slot: d.slotOf(t.Later.Process), T: us(t.Later.Start), Kind: "token", Text: t.Description})
	}
	if rr := res.Resource; rr != nil {
		for _, sw := range rr.StaleWrites {
			out = append(out, tlMark{Slot: d.slotOf(sw.Process), T: us(sw.Invoke), Kind: "stale", Text: sw.Description})
		}
		for _, l := range d.lostUpdates() {
			out = append(out, tlMark{Slot: l.w.slot, T: us(l.w.inv), Kind: "lost", Text: l.text()})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}

// lostUpdate is an accepted write that set a counter to a value not above the one before it: the
// increments in between were overwritten.
type lostUpdate struct {
	w      *write
	before int64
	lost   int64
}

func (l lostUpdate) text() string {
	return fmt.Sprintf("key %s: p%d wrote %d over %d: %d increments lost", l.w.key, l.w.pid, l.w.value, l.before, l.lost)
}

// lostUpdates locates the run's lost updates, computed once.
func (d *runData) lostUpdates() []lostUpdate {
	if d.lost == nil {
		d.lost = lostUpdates(d.writes)
		if d.lost == nil {
			d.lost = []lostUpdate{}
		}
	}
	return d.lost
}

// lostUpdates locates lost updates for drawing, in the order the writes completed. The count of
// record is the checker's (ResourceResult.LostUpdates); this says where they happened.
func lostUpdates(ws []write) []lostUpdate {
	order := make([]int, 0, len(ws))
	for i := range ws {
		if ws[i].accepted {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return ws[order[a]].comp < ws[order[b]].comp })
	cur := map[string]int64{}
	var out []lostUpdate
	for _, i := range order {
		w := &ws[i]
		if c, ok := cur[w.key]; ok && w.value <= c {
			out = append(out, lostUpdate{w: w, before: c, lost: c - w.value + 1})
		}
		cur[w.key] = w.value
	}
	return out
}
