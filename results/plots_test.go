package results

import (
	"image/color"
	"math"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// A steady 10 acquires a second draws 10 a second to the end of the run: the last second, cut
// short by the run's end, is rated over the time it covers (not drawn as a fall to 3 or 0), or
// left out when too short to rate; a run that ends on a whole second has no empty bin after it.
func TestRatePlotLastBin(t *testing.T) {
	for _, c := range []struct {
		name string
		end  int64 // ns
		bins int   // points drawn
	}{
		{"ends 0.3s into its last second", 10_300 * ms, 11},
		{"ends 2ms into its last second", 10_002 * ms, 10},
		{"ends on a whole second", 10_000 * ms, 10},
		{"runs an hour and a half, drawn in spans of 5s", 5_400_300 * ms, 1081},
	} {
		perSec := make([]float64, c.end/1e9+1)
		for i := range perSec {
			// Ten a second, as many as the part of the second the run covered.
			perSec[i] = math.Round(10 * math.Min(1, float64(c.end-int64(i)*1e9)/1e9))
		}
		pts := ratePoints(perSec, c.end)
		if len(pts) != c.bins {
			t.Errorf("%s: %d points, want %d", c.name, len(pts), c.bins)
			continue
		}
		last := pts[len(pts)-1]
		if math.Abs(last.Y-10) > 0.5 {
			t.Errorf("%s: the last point is %.2f/s at %.2fs, want 10/s", c.name, last.Y, last.X)
		}
		if last.X > float64(c.end)/1e9 {
			t.Errorf("%s: the last point is at %.2fs, after the run ended at %.3fs", c.name, last.X, float64(c.end)/1e9)
		}
	}
}

// Fault windows that overlap on the page are shaded once: across the plot, one shade fills several
// columns (an overlap shaded twice would be a darker second one); single columns are edges' blends.
func TestFaultShadeOverlapsShadedOnce(t *testing.T) {
	p := plot.New()
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 100, 0, 1
	p.Add(faultShade{wins: [][2]float64{{10, 30}, {20, 40}, {25, 35}, {70, 80}}})
	img := vgimg.NewWith(vgimg.UseWH(plotW, plotH), vgimg.UseDPI(plotDPI))
	var err error
	safely(&err, func() { drawPlot(p, draw.New(img)) })
	if err != nil {
		t.Fatal(err)
	}
	pic := img.Image()
	b := pic.Bounds()
	y := (b.Min.Y + b.Max.Y) / 2
	columns := map[color.Color]int{}
	for x := b.Min.X; x < b.Max.X; x++ {
		if r, g, bl, _ := pic.At(x, y).RGBA(); r != g || g != bl { // not white or grey
			columns[pic.At(x, y)]++
		}
	}
	var wide []color.Color
	for c, n := range columns {
		if n > 2 {
			wide = append(wide, c)
		}
	}
	if len(wide) != 1 {
		t.Fatalf("shades filling more than two columns: %v, want exactly one (all columns: %v)", wide, columns)
	}
	if n := columns[wide[0]]; n < b.Dx()/4 {
		t.Fatalf("the shade fills %d of %d columns: want the windows' 40%% of the data area", n, b.Dx())
	}
}
