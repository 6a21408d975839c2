package results

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// Geometry of a finding's timeline, in SVG user units (the page scales it to its width).
const (
	svgWidth  = 1240
	svgLabelW = 250
	svgRight  = 16
	svgAxisH  = 30
	svgLaneH  = 44
)

// timelineSVG draws a finding on a real time axis: time runs left to right to scale.
func timelineSVG(f finding) template.HTML {
	var b strings.Builder
	h := svgAxisH + len(f.Lanes)*svgLaneH + 6
	fmt.Fprintf(&b, `<svg class="finding-tl" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s" data-finding="%s">`,
		svgWidth, h, esc(f.Title), esc(f.ID))
	span := float64(max(f.Hi-f.Lo, 1))
	x := func(t int64) float64 {
		t = min(max(t, f.Lo), f.Hi)
		return svgLabelW + float64(t-f.Lo)/span*(svgWidth-svgLabelW-svgRight)
	}
	writeAxis(&b, f.Lo, f.Hi, x, h)
	for i := range f.Lanes {
		if i%2 == 1 {
			fmt.Fprintf(&b, `<rect class="lane-bg" x="0" y="%d" width="%d" height="%d"/>`, svgAxisH+i*svgLaneH, svgWidth, svgLaneH)
		}
	}
	for _, band := range f.Bands {
		x0, x1 := x(band.S), x(band.E)
		fmt.Fprintf(&b, `<rect class="band %s" data-role="%s" x="%.1f" y="%d" width="%.1f" height="%d"><title>%s</title></rect>`,
			esc(band.Class), esc(band.Role), x0, svgAxisH-4, math.Max(x1-x0, 2), h-svgAxisH, esc(band.Title))
	}
	for i, l := range f.Lanes {
		writeLane(&b, l, svgAxisH+i*svgLaneH, f.Lo, f.Hi, x)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func writeAxis(b *strings.Builder, lo, hi int64, x func(int64) float64, h int) {
	step := niceStep(float64(hi-lo) / 8)
	fmt.Fprintf(b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, svgLabelW, svgAxisH-6, svgWidth-svgRight, svgAxisH-6)
	for t := math.Ceil(float64(lo)/step) * step; t <= float64(hi); t += step {
		xt := x(int64(t))
		fmt.Fprintf(b, `<line class="grid" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`, xt, svgAxisH-6, xt, h)
		fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%d">%s</text>`, xt, svgAxisH-11, tickLabel(t, step))
	}
	fmt.Fprintf(b, `<text class="axis-title" x="4" y="%d">run time →</text>`, svgAxisH-11)
}

func writeLane(b *strings.Builder, l flane, y int, lo, hi int64, x func(int64) float64) {
	fmt.Fprintf(b, `<text class="lane-label" x="6" y="%d">%s</text>`, y+18, esc(l.Label))
	if l.Sub != "" {
		fmt.Fprintf(b, `<text class="lane-sub" x="6" y="%d">%s</text>`, y+34, esc(l.Sub))
	}
	for _, bar := range l.Bars {
		x0, x1 := x(bar.S), x(bar.E)
		w := math.Max(x1-x0, 1.5)
		top, height := y+20, 16
		if strings.HasPrefix(bar.Class, "fault") || bar.Class == "expired" {
			top, height = y+16, 22
		}
		role := ""
		if bar.Role != "" {
			role = ` data-role="` + esc(bar.Role) + `"`
		}
		fmt.Fprintf(b, `<rect class="%s"%s x="%.1f" y="%d" width="%.1f" height="%d" rx="2"><title>%s</title></rect>`,
			esc(bar.Class), role, x0, top, w, height, esc(bar.Title))
		if bar.Label != "" && w > 7*float64(len(bar.Label))+6 {
			fmt.Fprintf(b, `<text class="bar-label" x="%.1f" y="%d">%s</text>`, x0+4, top+height/2+4, esc(bar.Label))
		} else if bar.Label != "" {
			fmt.Fprintf(b, `<text class="bar-label out" x="%.1f" y="%d">%s</text>`, x0, y+12, esc(bar.Label))
		}
	}
	// Mark labels alternate between two rows when they would collide.
	lastEnd := [2]float64{-1e9, -1e9}
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
			esc(m.Class), role, xm, y+14, xm, y+svgLaneH-2, xm, y+15, esc(m.Title))
		row := 0
		if xm < lastEnd[0] {
			row = 1
		}
		lx := xm + 4
		lastEnd[row] = lx + 6.5*float64(len(m.Label))
		fmt.Fprintf(b, `<text class="mark-label %s" x="%.1f" y="%d">%s</text>`, esc(m.Class), lx, y+12+row*30, esc(m.Label))
	}
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
