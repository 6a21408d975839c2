package results

import (
	"cmp"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Geometry of a finding's timeline, in SVG user units (the page draws them 1:1 up to its width).
const (
	svgWidth  = 1240
	svgLabelW = 250
	svgRight  = 16
	svgAxisH  = 30
	svgLaneH  = 44
	// labelRowH is the height of a row of labels above a lane's bars; a lane whose labels would
	// collide grows by a row rather than drawing them over each other.
	labelRowH    = 14
	maxLabelRows = 4
	// minFaultW is the narrowest a fault window is drawn: a restart of 5ms in a span of seconds would
	// be a hairline. Its title keeps the real times.
	minFaultW = 6
)

// timelineSVG draws a finding on a real time axis: time runs left to right to scale.
func timelineSVG(f finding) template.HTML {
	span := float64(max(f.Hi-f.Lo, 1))
	x := func(t int64) float64 {
		t = min(max(t, f.Lo), f.Hi)
		return svgLabelW + float64(t-f.Lo)/span*(svgWidth-svgLabelW-svgRight)
	}
	layouts := make([]laneLayout, len(f.Lanes))
	h := svgAxisH + 6
	for i, l := range f.Lanes {
		layouts[i] = layoutLane(l, h-6, f.Lo, f.Hi, x)
		h += layouts[i].height
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="finding-tl" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s" data-finding="%s">`,
		svgWidth, h, esc(f.Title), esc(f.ID))
	writeAxis(&b, f.Lo, f.Hi, x, h)
	for i, ll := range layouts {
		if i%2 == 1 {
			fmt.Fprintf(&b, `<rect class="lane-bg" x="0" y="%d" width="%d" height="%d"/>`, ll.y, svgWidth, ll.height)
		}
	}
	for _, band := range f.Bands {
		x0, x1 := x(band.S), x(band.E)
		fmt.Fprintf(&b, `<rect class="band %s" data-role="%s" x="%.1f" y="%d" width="%.1f" height="%d"><title>%s</title></rect>`,
			esc(band.Class), esc(band.Role), x0, svgAxisH-4, math.Max(x1-x0, 2), h-svgAxisH, esc(band.Title))
	}
	for i, l := range f.Lanes {
		writeLane(&b, l, layouts[i], f.Lo, f.Hi, x)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func writeAxis(b *strings.Builder, lo, hi int64, x func(int64) float64, h int) {
	step := niceStep(float64(hi-lo) / 8)
	fmt.Fprintf(b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, svgLabelW, svgAxisH-6, svgWidth-svgRight, svgAxisH-6)
	for t := math.Ceil(float64(lo)/step) * step; t <= float64(hi); t += step {
		xt := x(int64(t))
		label := tickLabel(t, step)
		fmt.Fprintf(b, `<line class="grid" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`, xt, svgAxisH-6, xt, h)
		// A tick label centred on the last tick would run past the right edge: it ends there instead.
		anchor, lx := "", xt
		if xt+textW(label, 11)/2 > svgWidth-2 {
			anchor, lx = ` text-anchor="end"`, svgWidth-2
		}
		fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%d"%s>%s</text>`, lx, svgAxisH-11, anchor, label)
	}
	fmt.Fprintf(b, `<text class="axis-title" x="4" y="%d">run time →</text>`, svgAxisH-11)
}

// laneLayout is where a lane and its labels go: labels that do not fit inside their bar are set in
// rows above the bars, each in the first row where it clears the labels before it.
type laneLayout struct {
	y, height, rows int
	labels          []placedLabel
}

type placedLabel struct {
	x     float64
	row   int
	text  string
	class string
}

// textW estimates the width of text in the page's sans-serif at size px, on the generous side so
// that labels placed apart by it are apart on screen.
func textW(s string, size float64) float64 {
	return float64(utf8.RuneCountInString(s))*size*0.62 + 2
}

// layoutLane places the labels of lane l, whose top is y, that do not fit inside their bars.
func layoutLane(l flane, y int, lo, hi int64, x func(int64) float64) laneLayout {
	type want struct {
		x           float64
		text, class string
	}
	var ws []want
	for _, bar := range l.Bars {
		if bar.Label != "" && !fitsInside(bar, x) {
			ws = append(ws, want{x(bar.S), bar.Label, "bar-label out"})
		}
	}
	for _, m := range l.Marks {
		if m.Label != "" && m.T >= lo && m.T <= hi {
			ws = append(ws, want{x(m.T) + 4, m.Label, "mark-label " + m.Class})
		}
	}
	slices.SortStableFunc(ws, func(a, b want) int { return cmp.Compare(a.x, b.x) })
	out := laneLayout{y: y, rows: 1}
	var ends [maxLabelRows]float64 // where each row's last label ends
	for _, w := range ws {
		width := textW(w.text, 11.5)
		lx := min(max(w.x, svgLabelW+2), svgWidth-2-width)
		for row := range maxLabelRows {
			if lx >= ends[row]+4 {
				ends[row] = lx + width
				out.labels = append(out.labels, placedLabel{x: lx, row: row, text: w.text, class: w.class})
				out.rows = max(out.rows, row+1)
				break
			}
		}
		// A label with no room in any row is left out; its bar or mark keeps it in its title.
	}
	out.height = svgLaneH + (out.rows-1)*labelRowH
	return out
}

// fitsInside reports whether a bar's label is written inside the bar.
func fitsInside(bar fbar, x func(int64) float64) bool {
	return barWidth(bar, x) > textW(bar.Label, 11.5)+6
}

func barWidth(bar fbar, x func(int64) float64) float64 {
	w := math.Max(x(bar.E)-x(bar.S), 1.5)
	if isFault(bar) {
		w = math.Max(w, minFaultW)
	}
	return w
}

func isFault(bar fbar) bool { return strings.HasPrefix(bar.Class, "fault") }

func writeLane(b *strings.Builder, l flane, ll laneLayout, lo, hi int64, x func(int64) float64) {
	y := ll.y
	writeLaneLabel(b, "lane-label", l.Label, y+18, 13*1.1) // bold
	writeLaneLabel(b, "lane-sub", l.Sub, y+34, 11.5)
	barTop := y + 20 + (ll.rows-1)*labelRowH
	for _, bar := range l.Bars {
		x0, w := x(bar.S), barWidth(bar, x)
		// A window drawn wider than it lasted stays inside the plot.
		x0 = math.Min(x0, svgWidth-svgRight-w)
		top, height := barTop, 16
		if isFault(bar) || bar.Class == "expired" {
			top, height = barTop-4, 22
		}
		role := ""
		if bar.Role != "" {
			role = ` data-role="` + esc(bar.Role) + `"`
		}
		fmt.Fprintf(b, `<rect class="%s"%s x="%.1f" y="%d" width="%.1f" height="%d" rx="2"><title>%s</title></rect>`,
			esc(bar.Class), role, x0, top, w, height, esc(bar.Title))
		if bar.Label != "" && fitsInside(bar, x) {
			fmt.Fprintf(b, `<text class="bar-label" x="%.1f" y="%d">%s</text>`, x0+4, top+height/2+4, esc(bar.Label))
		}
	}
	for _, m := range l.Marks {
		if m.T < lo || m.T > hi {
			continue // a clamped mark would claim a time it does not have
		}
		xm := x(m.T)
		role := ""
		if m.Role != "" {
			role = ` data-role="` + esc(m.Role) + `"`
		}
		fmt.Fprintf(b, `<g class="mark %s"%s><line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/><circle cx="%.1f" cy="%d" r="3.5"/><title>%s</title></g>`,
			esc(m.Class), role, xm, barTop-6, xm, y+ll.height-2, xm, barTop-6, esc(m.Title))
	}
	for _, pl := range ll.labels {
		fmt.Fprintf(b, `<text class="%s" x="%.1f" y="%d">%s</text>`, esc(pl.class), pl.x, y+12+pl.row*labelRowH, esc(pl.text))
	}
}

// writeLaneLabel writes a lane's name left of its bars, shortened with an ellipsis (the whole in
// its title) when it would run into them.
func writeLaneLabel(b *strings.Builder, class, text string, y int, size float64) {
	if text == "" {
		return
	}
	shown := []rune(text)
	for len(shown) > 1 && textW(string(shown), size) > svgLabelW-12 {
		shown = shown[:len(shown)-1]
	}
	if len(shown) < len([]rune(text)) {
		fmt.Fprintf(b, `<text class="%s" x="6" y="%d">%s…<title>%s</title></text>`, class, y, esc(string(shown[:len(shown)-1])), esc(text))
		return
	}
	fmt.Fprintf(b, `<text class="%s" x="6" y="%d">%s</text>`, class, y, esc(text))
}

// niceStep rounds a step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// tickLabel renders a run time (ns) in seconds with as many decimals as the step needs.
func tickLabel(t, step float64) string {
	dec := 0
	for s := step / 1e9; s < 1 && dec < 6; s *= 10 {
		dec++
	}
	return strconv.FormatFloat(t/1e9, 'f', dec, 64) + "s"
}

func esc(s string) string { return template.HTMLEscapeString(s) }
