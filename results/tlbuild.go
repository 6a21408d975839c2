package results

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/lockpick-dev/lockpick/checker"
)

// tlBuilder gathers the whole-run timeline one acquire at a time. Each slot's lists are the page's
// flat tuples (see tlSlot), exact while the run is small. Past maxExactFails failed acquires they
// become counts per time bin, and past maxExactOK holds, holds less than a gap apart are merged: the
// bin width and the gap double as the run goes on, so a slot keeps a few thousand of each whatever
// the run's length, and both are widened once more at the end to the run's length/failBins (the
// gap exactly so, the bin to the next doubling).
type tlBuilder struct {
	lanes     []tlLane
	fails     int
	oks       int
	infos     int
	binW      int64 // µs; 0 while failed acquires are drawn one by one
	merging   bool  // holds are merged
	infoMerge bool  // acquires with unknown outcomes are merged, as holds are
}

// tlLane is one slot's part of the timeline while it is built.
type tlLane struct {
	ok, fail, info             []int64 // exact tuples, the first field a delta
	okLast, failLast, infoLast int64   // µs: the first field of the last tuple of each list
	bins                       [2][]int64
	holds, infos               spanSet
}

// spanSet is a slot's holds (or unknown outcomes) merged under a gap that doubles as needed.
type spanSet struct {
	groups []holdGroup
	gap    int64 // µs, the gap groups are merged under so far
}

// holdGroup is a drawn hold, or holds merged; times in µs, as the tuple draws them.
type holdGroup struct {
	inv, lat, hold int64 // the first hold's invoke and latency; hold runs from its completion to the group's end
	endedBy, pid   int64 // of a single hold
	n              int64 // holds merged (1: one hold)
}

func (g holdGroup) end() int64 { return g.inv + g.lat + g.hold }

// Bounds of the builder: a slot keeps at most maxBins bins and about maxGroups merged holds (and
// as many merged unknown outcomes, past maxExactInfo of them in the run).
const (
	maxExactInfo = 30000
	maxBins      = 4096
	maxGroups    = 3000
)

func newTLBuilder() *tlBuilder { return &tlBuilder{} }

func (b *tlBuilder) lane(s int) *tlLane {
	for len(b.lanes) <= s {
		b.lanes = append(b.lanes, tlLane{holds: spanSet{gap: 1}, infos: spanSet{gap: 1}})
	}
	return &b.lanes[s]
}

// fail draws a refused acquire.
func (b *tlBuilder) fail(slot int, inv, comp int64, isError bool) {
	b.fails++
	if b.fails > maxExactFails && b.binW == 0 {
		b.startBins()
	}
	l, code := b.lane(slot), b2i(isError)
	if b.binW > 0 {
		b.addBin(l, us(inv), code, 1)
		return
	}
	l.fail = append(l.fail, us(inv)-l.failLast, us(comp-inv), code)
	l.failLast = us(inv)
}

// startBins turns every slot's exact failed acquires into counts per bin.
func (b *tlBuilder) startBins() {
	b.binW = 1
	for s := range b.lanes {
		l := &b.lanes[s]
		var inv int64
		for i := 0; i < len(l.fail); i += 3 {
			inv += l.fail[i]
			b.addBin(l, inv, l.fail[i+2], 1)
		}
		l.fail = nil
	}
}

func (b *tlBuilder) addBin(l *tlLane, inv, code, n int64) {
	for inv/b.binW >= maxBins {
		b.widenBins()
	}
	i := int(inv / b.binW)
	if len(l.bins[code]) <= i {
		l.bins[code] = append(l.bins[code], make([]int64, i+1-len(l.bins[code]))...)
	}
	l.bins[code][i] += n
}

// widenBins doubles the bin width, adding each pair of bins into one.
func (b *tlBuilder) widenBins() {
	b.binW *= 2
	for s := range b.lanes {
		for c, bins := range b.lanes[s].bins {
			half := bins[:(len(bins)+1)/2]
			for i := range half {
				v := bins[2*i]
				if 2*i+1 < len(bins) {
					v += bins[2*i+1]
				}
				half[i] = v
			}
			b.lanes[s].bins[c] = half
		}
	}
}

// info draws an acquire with an unknown outcome, or one still pending when the history ended.
func (b *tlBuilder) info(slot int, inv, comp int64, pending bool, pid int) {
	b.infos++
	if b.infos > maxExactInfo && !b.infoMerge {
		b.startInfoMerging()
	}
	l := b.lane(slot)
	if b.infoMerge {
		l.infos.add(holdGroup{inv: us(inv), lat: us(comp - inv), endedBy: b2i(pending), pid: int64(pid), n: 1})
		return
	}
	l.info = append(l.info, us(inv)-l.infoLast, us(comp-inv), b2i(pending), int64(pid))
	l.infoLast = us(inv)
}

// startInfoMerging turns every slot's exact unknown outcomes into groups, as startMerging does holds.
func (b *tlBuilder) startInfoMerging() {
	b.infoMerge = true
	for s := range b.lanes {
		l := &b.lanes[s]
		var inv int64
		for i := 0; i < len(l.info); i += 4 {
			inv += l.info[i]
			l.infos.add(holdGroup{inv: inv, lat: l.info[i+1], endedBy: l.info[i+2], pid: l.info[i+3], n: 1})
		}
		l.info = nil
	}
}

// okStart draws a granted acquire, in the order granted, its hold's end to come (okEnd; until then
// the tuple's ended-by is -1). It returns where the tuple is, or -1 once holds are merged.
func (b *tlBuilder) okStart(slot int, inv, comp int64, pid int) int {
	b.oks++
	if b.oks > maxExactOK && !b.merging {
		b.startMerging()
	}
	if b.merging {
		return -1
	}
	l := b.lane(slot)
	l.ok = append(l.ok, us(inv)-l.okLast, us(comp-inv), 0, -1, int64(pid))
	l.okLast = us(inv)
	return len(l.ok) - 5
}

// okEnd ends the hold that okStart drew at tuple.
func (b *tlBuilder) okEnd(slot, tuple int, inv, comp, holdEnd int64, by byte, pid int) {
	l := b.lane(slot)
	end := us(holdEnd)
	if tuple >= 0 && !b.merging {
		l.ok[tuple+2], l.ok[tuple+3] = end-us(comp), int64(by)
		return
	}
	l.holds.add(holdGroup{inv: us(inv), lat: us(comp - inv), hold: end - us(comp), endedBy: int64(by), pid: int64(pid), n: 1})
}

// startMerging turns every slot's exact holds into groups; the holds not yet ended join when they end.
func (b *tlBuilder) startMerging() {
	b.merging = true
	for s := range b.lanes {
		l := &b.lanes[s]
		var inv int64
		for i := 0; i < len(l.ok); i += 5 {
			inv += l.ok[i]
			if l.ok[i+3] >= 0 {
				l.holds.add(holdGroup{inv: inv, lat: l.ok[i+1], hold: l.ok[i+2], endedBy: l.ok[i+3], pid: l.ok[i+4], n: 1})
			}
		}
		l.ok = nil
	}
}

// add adds a hold to the groups, merged into the last one when it began less than the gap after
// it ended; past 2*maxGroups the groups are merged again under a doubled gap.
func (l *spanSet) add(g holdGroup) {
	if n := len(l.groups); n > 0 && g.inv >= l.groups[n-1].inv && g.inv-l.groups[n-1].end() <= l.gap {
		l.groups[n-1].absorb(g)
		return
	}
	l.groups = append(l.groups, g)
	if len(l.groups) > 2*maxGroups {
		l.remerge(l.gap)
		for len(l.groups) > maxGroups {
			l.gap *= 2
			l.remerge(l.gap)
		}
	}
}

func (g *holdGroup) absorb(h holdGroup) {
	g.hold = max(g.hold, h.end()-g.inv-g.lat)
	g.n += h.n
}

// remerge sorts the groups by invoke and merges those less than gap apart, as mergeHold did.
func (l *spanSet) remerge(gap int64) {
	slices.SortStableFunc(l.groups, func(a, b holdGroup) int { return cmp.Compare(a.inv, b.inv) })
	out := l.groups[:0]
	for _, g := range l.groups {
		if n := len(out); n > 0 && g.inv-out[n-1].end() <= gap {
			out[n-1].absorb(g)
			continue
		}
		out = append(out, g)
	}
	l.groups = out
}

// encode fills the page's slots, with the bin width and merge gap they were drawn with. end is the
// run's end in µs.
func (b *tlBuilder) encode(t *tlData, end int64) {
	if b.binW > 0 {
		for b.binW < max(end/failBins, 1) {
			b.widenBins()
		}
		t.Bin = b.binW
		t.Notes = append(t.Notes, fmt.Sprintf("%d failed acquires are counted in bins of %s per slot", b.fails, checker.FormatSpan(t.Bin*1000)))
	}
	gap := max(end/failBins, 1)
	if b.merging {
		t.MergeGap = gap
		t.Notes = append(t.Notes, fmt.Sprintf("%d holds; each slot's holds less than %s apart are drawn merged", b.oks, checker.FormatSpan(t.MergeGap*1000)))
	}
	if b.infoMerge {
		t.Notes = append(t.Notes, fmt.Sprintf("%d acquires with an unknown outcome; each slot's less than %s apart are drawn as one", b.infos, checker.FormatSpan(gap*1000)))
	}
	for s := range b.lanes {
		if s >= len(t.Slots) {
			break
		}
		l, sl := &b.lanes[s], &t.Slots[s]
		sl.Fail, sl.Info = l.fail, l.info
		if b.binW > 0 {
			sl.Fail = encodeBins(l.bins)
		}
		sl.OK = l.ok
		if b.merging {
			l.holds.remerge(max(gap, l.holds.gap))
			sl.OK = encodeGroups(l.holds.groups)
		}
		if b.infoMerge {
			l.infos.remerge(max(gap, l.infos.gap))
			sl.Info = encodeInfos(l.infos.groups)
		}
	}
}

// encodeBins lists a slot's non-empty bins as tuples: bin delta, count, code.
func encodeBins(bins [2][]int64) []int64 {
	var out []int64
	var prev int64
	for i := range max(len(bins[0]), len(bins[1])) {
		for code, bs := range bins {
			if i < len(bs) && bs[i] > 0 {
				out = append(out, int64(i)-prev, bs[i], int64(code))
				prev = int64(i)
			}
		}
	}
	return out
}

// encodeGroups lists a slot's holds as ok tuples; a merged group's ended-by is 3 and its last field
// the number of holds it stands for.
func encodeGroups(gs []holdGroup) []int64 {
	var out []int64
	var last int64
	for _, g := range gs {
		by, last5 := g.endedBy, g.pid
		if g.n > 1 {
			by, last5 = 3, g.n
		}
		out = append(out, g.inv-last, g.lat, g.hold, by, last5)
		last = g.inv
	}
	return out
}

// encodeInfos lists a slot's unknown outcomes as info tuples, a merged group spanning its members
// (its pending flag and process those of the first).
func encodeInfos(gs []holdGroup) []int64 {
	var out []int64
	var last int64
	for _, g := range gs {
		out = append(out, g.inv-last, g.lat+g.hold, g.endedBy, g.pid)
		last = g.inv
	}
	return out
}
