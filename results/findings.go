package results

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
)

// finding is one thing the report explains on its own real-time axis: a violation (two holds), or
// a stale write of the counter workload. Lanes are drawn top to bottom; bands span every lane.
type finding struct {
	ID     string
	Kind   string
	Title  string
	Cause  string
	Lo, Hi int64
	Lanes  []flane
	Bands  []fbar
}

type flane struct {
	Label, Sub string
	Bars       []fbar
	Marks      []fmark
}

// fbar is a span on a lane; Role, when set, becomes a data-role attribute the browser test finds.
type fbar struct {
	S, E               int64
	Class, Title, Role string
	Label              string
}

type fmark struct {
	T                  int64
	Class, Title, Role string
	Label              string
}

// How many findings get a timeline of their own; the rest are listed as text.
const (
	maxViolationTimelines = 20
	maxStaleTimelines     = 10
)

// findings builds the timelines of the listed violations, then of the stale writes.
func findings(res *checker.Result, d *runData) []finding {
	var out []finding
	for i := range res.Violations {
		if i == maxViolationTimelines {
			break
		}
		out = append(out, violationFinding(i, &res.Violations[i], res, d))
	}
	if res.Resource != nil {
		for i := range res.Resource.StaleWrites {
			if i == maxStaleTimelines {
				break
			}
			out = append(out, staleFinding(i, &res.Resource.StaleWrites[i], res, d))
		}
	}
	return out
}

func violationFinding(i int, v *checker.Violation, res *checker.Result, d *runData) finding {
	f := finding{
		ID: fmt.Sprintf("violation-%d", i+1), Kind: "violation",
		Title: fmt.Sprintf("Violation %d of %d: key %s, both held for %s", i+1, res.ViolationCount, v.Key, checker.FormatSpan(v.Overlap)),
		Cause: v.Cause,
	}
	if f.Cause == "" {
		f.Cause = v.Description
	}
	lo, hi := min(v.A.Invoke, v.B.Invoke), max(v.OverlapEnd, clampEnd(v.A.End, d), clampEnd(v.B.End, d))
	for _, e := range v.Nemesis {
		lo = min(lo, e.Time)
	}
	pad := max((hi-lo)/12, int64(time.Millisecond))
	f.Lo, f.Hi = lo-pad, hi+pad
	f.Lanes = append(f.Lanes, holdLane("A", "hold-a", v.A, d), holdLane("B", "hold-b", v.B, d))
	nodes := union(v.A.Nodes, v.B.Nodes)
	if len(nodes) == 0 {
		for _, e := range v.Nemesis {
			nodes = union(nodes, e.Nodes)
		}
	}
	slices.SortFunc(nodes, naturalLess)
	for _, n := range nodes {
		l := nodeLane(n, f.Lo, f.Hi, res.Faults, d)
		// The nemesis operations on the node, each at its invoke (kill, start, a clock jump...).
		for _, e := range v.Nemesis {
			if e.Type == history.Invoke && len(e.Offsets) == 0 && (len(e.Nodes) == 0 || slices.Contains(e.Nodes, n)) {
				l.Marks = append(l.Marks, fmark{T: e.Time, Class: "nemesis", Label: e.F, Title: fmt.Sprintf("%s %s %s at %s", e.Fault, e.F, strings.Join(e.Nodes, " "), checker.FormatTime(e.Time))})
			}
		}
		l.Marks = append(l.Marks, roleMarks(n, v.Roles, f.Lo, f.Hi)...)
		f.Lanes = append(f.Lanes, l)
	}
	f.Bands = []fbar{{S: v.OverlapStart, E: v.OverlapEnd, Class: "overlap", Role: "overlap",
		Title: fmt.Sprintf("both held [%s, %s]", checker.FormatTime(v.OverlapStart), checker.FormatTime(v.OverlapEnd))}}
	return f
}

// roleMarks marks the role changes the system announced for node n inside [lo, hi] (a replica
// promoted by a failover), so a reader sees which node was the primary when each hold was granted.
func roleMarks(n string, roles []history.Event, lo, hi int64) []fmark {
	var out []fmark
	for _, e := range roles {
		role, ok := e.Roles[n]
		if !ok || e.Time < lo || e.Time > hi {
			continue
		}
		title := fmt.Sprintf("%s became %s at %s", n, role, checker.FormatTime(e.Time))
		if e.Note != "" {
			title += " (" + e.Note + ")"
		}
		out = append(out, fmark{T: e.Time, Class: "role", Role: "role", Label: "→ " + role, Title: title})
	}
	return out
}

func clampEnd(t int64, d *runData) int64 {
	if t == checker.Never {
		return d.end
	}
	return t
}

// holdLane draws a hold: its acquire in flight, the hold, and the deadline and end of work.
func holdLane(name, role string, h checker.HoldInfo, d *runData) flane {
	end := clampEnd(h.End, d)
	l := flane{
		Label: fmt.Sprintf("%s: p%d (slot %d)", name, h.Process, d.slotOf(h.Process)),
		Sub:   "granted by " + orNone(strings.Join(h.Nodes, " ")),
	}
	l.Bars = append(l.Bars,
		fbar{S: h.Invoke, E: h.Start, Class: "inflight", Title: fmt.Sprintf("p%d asked at %s", h.Process, checker.FormatTime(h.Invoke))},
		fbar{S: h.Start, E: end, Class: "hold", Role: role, Label: "p" + fmt.Sprint(h.Process),
			Title: fmt.Sprintf("p%d held [%s, %s], ended by %s; granted by %s", h.Process, checker.FormatTime(h.Start), checker.FormatTime(h.End), h.EndedBy, orNone(strings.Join(h.Nodes, " ")))})
	if h.Deadline != checker.Never && h.Deadline > 0 {
		l.Marks = append(l.Marks, fmark{T: h.Deadline, Class: "deadline", Label: "deadline", Title: "lease deadline " + checker.FormatTime(h.Deadline)})
	}
	if h.WorkEnd > 0 && h.WorkEnd > h.Deadline {
		l.Marks = append(l.Marks, fmark{T: h.WorkEnd, Class: "overrun", Label: "work ended", Title: "work ended " + checker.FormatTime(h.WorkEnd) + ", after the deadline"})
	}
	return l
}

// nodeLane draws the fault windows that hit a node inside [lo, hi], with its clock offset.
func nodeLane(n string, lo, hi int64, faults []checker.FaultWindow, d *runData) flane {
	l := flane{Label: "node " + n, Sub: clockSub(d.offsets[n], lo, hi)}
	for _, w := range faults {
		if w.End < lo || w.Start > hi || (len(w.Nodes) > 0 && !slices.Contains(w.Nodes, n)) {
			continue
		}
		// The bar names the nemesis; its operations (kill, start) are marks of their own.
		l.Bars = append(l.Bars, fbar{S: w.Start, E: w.End, Class: "fault", Role: "fault", Label: w.Fault,
			Title: faultTitle(faultName(w)+" "+strings.Join(w.Nodes, " "), w)})
	}
	for _, p := range d.offsets[n] {
		if p.t >= lo && p.t <= hi && !p.measured {
			l.Marks = append(l.Marks, fmark{T: p.t, Class: "clock", Label: "clock " + formatOffset(p.offset), Title: fmt.Sprintf("%s clock set to %s at %s", n, formatOffset(p.offset), checker.FormatTime(p.t))})
		}
	}
	return l
}

// faultTitle is a fault window's tooltip: its real times and length, which a window drawn wider
// than it lasted (minFaultW) does not show.
func faultTitle(name string, w checker.FaultWindow) string {
	return fmt.Sprintf("%s [%s, %s], %s", name, checker.FormatTime(w.Start), checker.FormatTime(w.End), checker.FormatSpan(w.End-w.Start))
}

// clockSub says a node's clock offset over [lo, hi] when a clock nemesis ever moved it.
func clockSub(pts []offsetPoint, lo, hi int64) string {
	if len(pts) == 0 {
		return ""
	}
	at := func(t int64) int64 {
		var off int64
		for _, p := range pts {
			if p.t <= t {
				off = p.offset
			}
		}
		return off
	}
	a, b := at(lo), at(hi)
	if a == b {
		return "clock offset " + formatOffset(a)
	}
	return "clock offset " + formatOffset(a) + " → " + formatOffset(b)
}

func formatOffset(ns int64) string {
	d := time.Duration(ns).Round(time.Millisecond)
	if d < 0 {
		return "-" + (-d).String()
	}
	return "+" + d.String()
}

// staleFinding draws a stale write: the writer's hold and its end, the write after it, the fault
// that stopped the writer, and the holders in between whose updates it overwrote.
func staleFinding(i int, sw *checker.StaleWrite, res *checker.Result, d *runData) finding {
	rr := res.Resource
	f := finding{
		ID: fmt.Sprintf("stale-%d", i+1), Kind: "stale write",
		Title: fmt.Sprintf("Stale write %d of %d: key %s, p%d wrote %s", i+1, rr.StaleWriteCount, sw.Key, sw.Process, sw.Value),
		Cause: sw.Description,
	}
	own := d.holdBefore(sw.Process, sw.Key, sw.Read)
	lo, hi := sw.Read, sw.Invoke
	if own != nil {
		lo = own.inv
	}
	w := d.writeAt(sw.Process, sw.Invoke)
	if w != nil && w.comp > 0 {
		hi = w.comp
	}
	for _, l := range d.lostUpdates() {
		if l.w == w && w != nil {
			f.Cause += fmt.Sprintf(". It set the counter back from %d to %d: %d increments lost", l.before, w.value, l.lost)
		}
	}
	pad := max((hi-lo)/12, int64(time.Millisecond))
	f.Lo, f.Hi = lo-pad, hi+pad
	slot := d.slotOf(sw.Process)
	writer := flane{Label: fmt.Sprintf("writer: p%d (slot %d)", sw.Process, slot)}
	if own != nil {
		writer.Sub = "granted by " + orNone(strings.Join(own.nodes, " "))
		writer.Bars = append(writer.Bars, fbar{S: own.comp, E: own.holdEnd, Class: "hold", Role: "hold-a", Label: fmt.Sprintf("p%d", sw.Process),
			Title: fmt.Sprintf("p%d held [%s, %s]", sw.Process, checker.FormatTime(own.comp), checker.FormatTime(own.holdEnd))})
	}
	if sw.Deadline > 0 {
		writer.Bars = append(writer.Bars, fbar{S: sw.Deadline, E: sw.Invoke, Class: "expired", Label: "lease expired", Title: "p" + fmt.Sprint(sw.Process) + " still working after its lease expired"})
		writer.Marks = append(writer.Marks, fmark{T: sw.Deadline, Class: "deadline", Label: "deadline", Title: "lease deadline " + checker.FormatTime(sw.Deadline)})
	}
	writer.Marks = append(writer.Marks,
		fmark{T: sw.Read, Class: "read", Label: "read", Title: "read at " + checker.FormatTime(sw.Read)},
		fmark{T: sw.Invoke, Class: "stale", Role: "stale-write", Label: "write " + sw.Value, Title: sw.Description})
	f.Lanes = append(f.Lanes, writer, clientFaultLane(slot, f.Lo, f.Hi, res.Faults, d))
	f.Lanes = append(f.Lanes, othersLane(d, sw.Key, slot, f.Lo, f.Hi))
	f.Bands = []fbar{{S: sw.Read, E: sw.Invoke, Class: "overlap", Title: "between its read and its write, others updated the counter"}}
	return f
}

// clientFaultLane draws the client faults (pauses) that hit a slot.
func clientFaultLane(slot int, lo, hi int64, faults []checker.FaultWindow, d *runData) flane {
	l := flane{Label: fmt.Sprintf("client faults, slot %d", slot)}
	for _, w := range faults {
		if w.End < lo || w.Start > hi {
			continue
		}
		for _, n := range w.Nodes {
			if pid, ok := clientTarget(n); ok && d.slotOf(pid) == slot {
				l.Bars = append(l.Bars, fbar{S: w.Start, E: w.End, Class: "fault", Role: "fault", Label: w.Fault + " " + n,
					Title: faultTitle(w.Fault+" "+n, w)})
			}
		}
	}
	return l
}

// othersLane draws the holds of other slots on key inside [lo, hi], merged where closer than a
// pixel would show.
func othersLane(d *runData, key string, slot int, lo, hi int64) flane {
	var spans [][2]int64
	n := 0
	for i := range d.holds {
		a := &d.holds[i]
		if a.key != key || d.slotOf(a.pid) == slot || a.holdEnd < lo || a.comp > hi {
			continue
		}
		n++
		spans = append(spans, [2]int64{a.comp, a.holdEnd})
	}
	l := flane{Label: "other holders", Sub: fmt.Sprintf("%d holds of %s", n, key)}
	for _, s := range mergeSpans(spans, (hi-lo)/600) {
		l.Bars = append(l.Bars, fbar{S: s[0], E: s[1], Class: "hold other"})
	}
	return l
}

func mergeSpans(spans [][2]int64, gap int64) [][2]int64 {
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	var out [][2]int64
	for _, s := range spans {
		if k := len(out) - 1; k >= 0 && s[0] <= out[k][1]+gap {
			out[k][1] = max(out[k][1], s[1])
			continue
		}
		out = append(out, s)
	}
	return out
}

// holdBefore is the latest ok acquire of pid on key that completed at or before t.
func (d *runData) holdBefore(pid int, key string, t int64) *okHold {
	var best *okHold
	for i := range d.holds {
		a := &d.holds[i]
		if a.pid == pid && a.key == key && a.comp <= t {
			best = a
		}
	}
	return best
}

func (d *runData) writeAt(pid int, inv int64) *write {
	for i := range d.writes {
		if d.writes[i].pid == pid && d.writes[i].inv == inv {
			return &d.writes[i]
		}
	}
	return nil
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(not reported)"
	}
	return s
}

// naturalLess orders node names as people count them: n2 before n10.
func naturalLess(a, b string) int {
	ta, na := splitNumber(a)
	tb, nb := splitNumber(b)
	if ta != tb {
		return strings.Compare(ta, tb)
	}
	return na - nb
}

func splitNumber(s string) (string, int) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	n, _ := strconv.Atoi(s[i:])
	return s[:i], n
}
