package results

import (
	"cmp"
	"fmt"
	"image"
	"image/color"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/lockpick-dev/lockpick/checker"
)

// Plot files inside a run directory.
const (
	LatencyPlotFile = "plot-latency.png"
	RatePlotFile    = "plot-rate.png"
	ClockPlotFile   = "plot-clock.png"
)

// plotImage is one plot written to the run directory, kept for the report to embed.
type plotImage struct {
	File, Title, Caption string
	PNG                  []byte
}

// Colours shared by the plots and the page (report.css uses the same).
var (
	colOK     = color.NRGBA{0x2e, 0x9e, 0x4f, 0xff}
	colFail   = color.NRGBA{0x9a, 0xa0, 0xa6, 0xff}
	colError  = color.NRGBA{0xb0, 0x30, 0x30, 0xff}
	colInfo   = color.NRGBA{0xe8, 0x8a, 0x1a, 0xff}
	colFault  = color.NRGBA{0xf5, 0xa6, 0x23, 0x40}
	colNodeNs = []color.NRGBA{{0x1f, 0x5f, 0xbf, 0xff}, {0xc0, 0x39, 0x2b, 0xff}, {0x27, 0xae, 0x60, 0xff}, {0x8e, 0x44, 0xad, 0xff}, {0xd3, 0x54, 0x00, 0xff}, {0x16, 0xa0, 0x85, 0xff}}
)

// Size of a plot image.
const (
	plotW   = 26 * vg.Centimeter
	plotH   = 8 * vg.Centimeter
	plotDPI = 110
	// maxPlotPoints bounds the latency scatter of each outcome, sampled evenly beyond it.
	maxPlotPoints = 60000
)

// writePlots draws the plots of a run into dir and returns them.
func writePlots(dir string, res *checker.Result, d *runData) ([]plotImage, error) {
	wins := faultSpans(res.Faults)
	var out []plotImage
	lat, caption, err := latencyPlot(d, wins)
	if err != nil {
		return nil, err
	}
	out = append(out, plotImage{File: LatencyPlotFile, Title: "Acquire latency", Caption: caption, PNG: lat})
	rate, err := ratePlot(d, wins)
	if err != nil {
		return nil, err
	}
	rateCaption := "Acquires invoked per second by outcome (top) and leases granted per second (bottom); fault windows shaded."
	if _, left := rateSeconds(d.end); left > 0 {
		rateCaption += fmt.Sprintf(" The run's last %s, too short a bin to rate, is left out.", checker.FormatSpan(left))
	}
	out = append(out, plotImage{File: RatePlotFile, Title: "Attempts and grants per second", Caption: rateCaption, PNG: rate})
	if len(d.offsets) > 0 {
		clk, err := clockPlot(d, wins)
		if err != nil {
			return nil, err
		}
		out = append(out, plotImage{File: ClockPlotFile, Title: "Node clock offsets", Caption: "Offsets the clock nemesis set (lines) and measured afterwards (points), per node; fault windows shaded.", PNG: clk})
	}
	for _, p := range out {
		if err := os.WriteFile(filepath.Join(dir, p.File), p.PNG, 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", p.File, err)
		}
	}
	return out, nil
}

// faultSpans are the fault windows in seconds.
func faultSpans(fs []checker.FaultWindow) [][2]float64 {
	out := make([][2]float64, 0, len(fs))
	for _, f := range fs {
		out = append(out, [2]float64{sec(f.Start), sec(f.End)})
	}
	return out
}

func sec(ns int64) float64 { return float64(ns) / 1e9 }

// faultShade shades fault windows over the whole height of a plot.
type faultShade struct{ wins [][2]float64 }

func (f faultShade) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	var spans [][2]vg.Length
	for _, w := range f.wins {
		x0 := max(trX(w[0]), c.Min.X)
		x1 := min(trX(w[1]), c.Max.X)
		// A fault of a few milliseconds is shaded wide enough to be seen.
		x1 = max(x1, x0+vg.Points(3))
		spans = append(spans, [2]vg.Length{x0, x1})
	}
	// Windows that overlap on the page are shaded once, as one: the same shade wherever a fault
	// was in effect, and one fill rather than hundreds on a long run's plot.
	slices.SortFunc(spans, func(a, b [2]vg.Length) int { return cmp.Compare(a[0], b[0]) })
	for i := 0; i < len(spans); {
		x0, x1 := spans[i][0], spans[i][1]
		for i++; i < len(spans) && spans[i][0] <= x1; i++ {
			x1 = max(x1, spans[i][1])
		}
		c.FillPolygon(colFault, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
	}
}

func (f faultShade) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(colFault, []vg.Point{c.Min, {X: c.Max.X, Y: c.Min.Y}, c.Max, {X: c.Min.X, Y: c.Max.Y}})
}

func newPlot(title, ylabel string, d *runData, wins [][2]float64) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "run time (s)"
	p.Y.Label.Text = ylabel
	p.X.Min, p.X.Max = 0, math.Max(sec(d.end), 1)
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(faultShade{wins})
	if len(wins) > 0 {
		p.Legend.Add("fault", faultShade{})
	}
	p.Add(plotter.NewGrid())
	sans(p)
	return p
}

// sansFont is the face of every plot text, matching the page rather than gonum's serif default.
var sansFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

func sans(p *plot.Plot) {
	p.Title.TextStyle.Font = font.From(sansFont, 12)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sansFont, 11)
		a.Tick.Label.Font = font.From(sansFont, 10)
	}
	p.Legend.TextStyle.Font = font.From(sansFont, 10)
}

// legendW is the margin right of a plot that holds its legend, so the legend never hides points.
const legendW = 3.4 * vg.Centimeter

// drawPlot draws p into c with its legend in a margin on the right.
func drawPlot(p *plot.Plot, c draw.Canvas) {
	legend := p.Legend
	p.Legend = plot.NewLegend()
	p.Draw(draw.Crop(c, 0, -legendW, 0, 0))
	legend.Top, legend.Left = true, true
	legend.Draw(draw.Crop(c, c.Max.X-c.Min.X-legendW+vg.Millimeter*3, 0, 0, -vg.Millimeter*8))
	p.Legend = legend
}

// latencyGroups are the scatter's outcomes, in the order drawn (ok on top).
var latencyGroups = []struct {
	o     byte
	name  string
	color color.Color
}{{outFail, "fail (held)", colFail}, {outError, "fail (error)", colError}, {outInfo, "info", colInfo}, {outOK, "ok", colOK}}

// latencyPlot scatters every completed acquire's latency by outcome (sampled past maxPlotPoints of
// one outcome), with per-interval p50 and p99.
func latencyPlot(d *runData, wins [][2]float64) ([]byte, string, error) {
	p := newPlot("Acquire latency", "latency (ms, log)", d, wins)
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	caption := "Each completed acquire at its invoke time: ok green, failed (held) grey, failed (error) red, unknown (info) orange; lines are the p50 and p99 of all completed acquires per interval; fault windows shaded."
	caption += d.lat.sampledNote()
	lo := math.Inf(1)
	for _, g := range latencyGroups {
		for _, pt := range d.lat.scatter[g.o].pts {
			lo = math.Min(lo, pt.Y)
		}
	}
	if math.IsInf(lo, 1) {
		lo = 0.01
	}
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo)))
	for _, g := range latencyGroups {
		pts := d.lat.scatter[g.o].pts
		if len(pts) == 0 {
			continue
		}
		// Gathered as acquires completed; drawn in the order they were invoked, as always, so
		// that where points overlap the page does not change.
		slices.SortStableFunc(pts, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, "", fmt.Errorf("latency plot: %w", err)
		}
		s.GlyphStyle = draw.GlyphStyle{Color: g.color, Radius: vg.Points(1.1), Shape: draw.BoxGlyph{}}
		p.Add(s)
		p.Legend.Add(g.name, s)
	}
	for _, q := range []struct {
		q     float64
		name  string
		dash  []vg.Length
		color color.Color
	}{{0.5, "p50", nil, color.Black}, {0.99, "p99", []vg.Length{vg.Points(4), vg.Points(2)}, color.NRGBA{0x55, 0x00, 0x88, 0xff}}} {
		pts := d.lat.quantileLine(d.end, q.q)
		if len(pts) < 2 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, "", fmt.Errorf("latency plot: %w", err)
		}
		l.LineStyle = draw.LineStyle{Color: q.color, Width: vg.Points(1.4), Dashes: q.dash}
		p.Add(l)
		p.Legend.Add(q.name, l)
	}
	if p.Y.Max <= p.Y.Min {
		// No acquire completed: an empty log axis still needs a positive range to draw.
		p.Y.Max = p.Y.Min * 100
	}
	b, err := renderPNG(p)
	return b, caption, err
}

// ratePlot stacks two panels: acquires invoked per second by outcome, and grants per second.
func ratePlot(d *runData, wins [][2]float64) ([]byte, error) {
	counts, total := d.rate.by, d.rate.total
	top := newPlot("Acquires invoked per second", "per second", d, wins)
	bottom := newPlot("Leases granted per second", "per second", d, wins)
	top.Y.Min, bottom.Y.Min = 0, 0
	if err := addRateLine(top, "all attempts", total, d.end, color.Black); err != nil {
		return nil, err
	}
	for _, g := range []struct {
		o    byte
		name string
		c    color.Color
	}{{outFail, "fail (held)", colFail}, {outError, "fail (error)", colError}, {outInfo, "info", colInfo}} {
		if slices.Max(counts[g.o]) > 0 {
			if err := addRateLine(top, g.name, counts[g.o], d.end, g.c); err != nil {
				return nil, err
			}
		}
	}
	if err := addRateLine(bottom, "granted (ok)", counts[outOK], d.end, colOK); err != nil {
		return nil, err
	}
	img := vgimg.NewWith(vgimg.UseWH(plotW, 2*plotH), vgimg.UseDPI(plotDPI))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Millimeter * 2}
	ps := [][]*plot.Plot{{top}, {bottom}}
	cs := plot.Align(ps, tiles, dc)
	var err error
	safely(&err, func() {
		drawPlot(top, cs[0][0])
		drawPlot(bottom, cs[1][0])
	})
	if err != nil {
		return nil, err
	}
	b, err := encodePNG(img)
	if err != nil {
		return nil, fmt.Errorf("rate plot: %w", err)
	}
	return b, nil
}

// maxRatePoints is about the plot's width in pixels: a run longer than that many seconds draws each
// line as the mean rate over spans of several seconds, which is what its pixels could show anyway,
// at a fraction of the cost of stroking a segment per second.
const maxRatePoints = 1200

// minRateBin is the shortest last bin the rate plot draws: the run's end cuts its last second
// short, and counts over a few milliseconds scaled to a second are noise, not a rate.
const minRateBin = 250 * time.Millisecond

// rateSeconds are the widths in seconds of the per-second bins of a run that ended at end (ns):
// whole seconds, then the covered part of the last, unless it is shorter than minRateBin; left is
// that part when it is left out.
func rateSeconds(end int64) (widths []float64, left int64) {
	for i := int64(0); i*1e9 < end; i++ {
		w := min(end-i*1e9, 1e9)
		if w < int64(minRateBin) {
			return widths, w
		}
		widths = append(widths, float64(w)/1e9)
	}
	return widths, 0
}

// ratePoints turns per-second counts into rates: each bin's count over the time it covers, so the
// last second, cut short by the end of the run, is not drawn as a fall. A run longer than
// maxRatePoints seconds draws the mean rate over spans of several seconds.
func ratePoints(perSec []float64, end int64) plotter.XYs {
	widths, _ := rateSeconds(end)
	n := min(len(perSec), len(widths))
	span := max((n+maxRatePoints-1)/maxRatePoints, 1)
	pts := make(plotter.XYs, 0, n/span+1)
	for i := 0; i < n; i += span {
		var sum, covered float64
		for j := i; j < min(i+span, n); j++ {
			sum += perSec[j]
			covered += widths[j]
		}
		pts = append(pts, plotter.XY{X: float64(i) + covered/2, Y: sum / covered})
	}
	return pts
}

func addRateLine(p *plot.Plot, name string, perSec []float64, end int64, c color.Color) error {
	l, err := plotter.NewLine(ratePoints(perSec, end))
	if err != nil {
		return fmt.Errorf("rate plot: %w", err)
	}
	l.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1.3)}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// clockPlot draws each node's clock offset: the offsets set as steps, the measured ones as points.
func clockPlot(d *runData, wins [][2]float64) ([]byte, error) {
	p := newPlot("Node clock offsets", "offset (s)", d, wins)
	names := slices.Sorted(maps.Keys(d.offsets))
	for i, n := range names {
		c := colNodeNs[i%len(colNodeNs)]
		set := plotter.XYs{{X: 0, Y: 0}}
		var measured plotter.XYs
		for _, pt := range d.offsets[n] {
			if pt.measured {
				measured = append(measured, plotter.XY{X: sec(pt.t), Y: sec(pt.offset)})
				continue
			}
			set = append(set, plotter.XY{X: sec(pt.t), Y: set[len(set)-1].Y}, plotter.XY{X: sec(pt.t), Y: sec(pt.offset)})
		}
		set = append(set, plotter.XY{X: sec(d.end), Y: set[len(set)-1].Y})
		l, err := plotter.NewLine(set)
		if err != nil {
			return nil, fmt.Errorf("clock plot: %w", err)
		}
		l.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1.4)}
		p.Add(l)
		p.Legend.Add(n+" set", l)
		if len(measured) > 0 {
			s, err := plotter.NewScatter(measured)
			if err != nil {
				return nil, fmt.Errorf("clock plot: %w", err)
			}
			s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
			p.Add(s)
			p.Legend.Add(n+" measured", s)
		}
	}
	return renderPNG(p)
}

func renderPNG(p *plot.Plot) ([]byte, error) {
	img := vgimg.NewWith(vgimg.UseWH(plotW, plotH), vgimg.UseDPI(plotDPI))
	var err error
	safely(&err, func() { drawPlot(p, draw.New(img)) })
	if err != nil {
		return nil, err
	}
	b, err := encodePNG(img)
	if err != nil {
		return nil, fmt.Errorf("plot %q: %w", p.Title.Text, err)
	}
	return b, nil
}

// encodePNG compresses a drawn plot for the report, fast: a report is written at the end of every
// run and every check (writeOpaquePNG).
func encodePNG(img *vgimg.Canvas) ([]byte, error) {
	if rgba, ok := img.Image().(*image.RGBA); ok {
		return writeOpaquePNG(rgba)
	}
	return standardPNG(img.Image())
}

// safely runs draw, turning a panic of the plotting library (it panics on some degenerate axes)
// into an error: a plot must never take the verdict down with it.
func safely(err *error, draw func()) {
	defer func() {
		if r := recover(); r != nil {
			*err = fmt.Errorf("plot: %v", r)
		}
	}()
	draw()
}
