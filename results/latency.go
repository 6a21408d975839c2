package results

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
	"gonum.org/v1/plot/plotter"
)

// latencyData is what the latency plot draws, gathered one completed acquire at a time: the scatter
// of each outcome, every point while at most maxPlotPoints acquires completed and past that an even
// sample of at most maxSampledPoints per outcome (every stride-th, the stride doubling), so the plot
// never draws more than maxPlotPoints; and the quantile lines, exact from every latency
// while at most maxPlotPoints acquires completed, and past that from a DDSketch per time bucket (1%
// relative error; a well-kept mergeable sketch, so buckets widen by merging).
type latencyData struct {
	completed int
	scatter   [outcomes]sampled
	exact     []latPoint // every completed acquire, while there are at most maxPlotPoints
	// sketches are the latencies (ms) per bucket of width ns once exact has overflowed.
	sketches []*ddsketch.DDSketch
	width    int64
}

// sampled is one outcome's points: every stride-th of seen.
type sampled struct {
	pts    plotter.XYs
	seen   int
	stride int
}

type latPoint struct{ inv, lat int64 }

const (
	// maxSampledPoints bounds each outcome's points in a run past maxPlotPoints acquires.
	maxSampledPoints = maxPlotPoints / outcomes
	// minQuantileWidth is the narrowest bucket of the quantile lines; maxQuantileBuckets bounds the
	// sketches kept while the run goes on (the plot draws 30 to 60).
	minQuantileWidth   = int64(1e8)
	maxQuantileBuckets = 240
	sketchAccuracy     = 0.01
)

func newLatencyData() *latencyData {
	l := &latencyData{width: minQuantileWidth}
	for i := range l.scatter {
		l.scatter[i].stride = 1
	}
	return l
}

func latencyMS(inv, comp int64) float64 { return math.Max(float64(comp-inv)/1e6, 0.001) }

// add takes a completed acquire.
func (l *latencyData) add(out byte, inv, comp int64) {
	l.completed++
	s := &l.scatter[out]
	if s.seen%s.stride == 0 {
		s.pts = append(s.pts, plotter.XY{X: sec(inv), Y: latencyMS(inv, comp)})
		if l.completed > maxPlotPoints && len(s.pts) > maxSampledPoints {
			// Keep every other point: those whose index is a multiple of the doubled stride.
			for i := range (len(s.pts) + 1) / 2 {
				s.pts[i] = s.pts[2*i]
			}
			s.pts = s.pts[:(len(s.pts)+1)/2]
			s.stride *= 2
		}
	}
	s.seen++
	if l.sketches == nil && len(l.exact) < maxPlotPoints {
		l.exact = append(l.exact, latPoint{inv, comp - inv})
		return
	}
	if l.sketches == nil {
		l.sketches = []*ddsketch.DDSketch{}
		for _, p := range l.exact {
			l.sketch(p.inv, p.inv+p.lat)
		}
		l.exact = nil
	}
	l.sketch(inv, comp)
}

func (l *latencyData) sketch(inv, comp int64) {
	for inv/l.width >= maxQuantileBuckets {
		l.widen()
	}
	i := int(inv / l.width)
	for len(l.sketches) <= i {
		l.sketches = append(l.sketches, nil)
	}
	if l.sketches[i] == nil {
		l.sketches[i] = newSketch()
	}
	l.sketches[i].Add(latencyMS(inv, comp)) // positive: no error
}

// newSketch maps latencies to buckets by cubic interpolation between powers of two rather than by a
// logarithm: the same accuracy, cheaper per latency (a million of them in a large run).
func newSketch() *ddsketch.DDSketch {
	m, err := mapping.NewCubicallyInterpolatedMapping(sketchAccuracy)
	if err != nil {
		panic(err) // only for an accuracy outside (0, 1)
	}
	return ddsketch.NewDDSketchFromStoreProvider(m, store.DenseStoreConstructor)
}

// widen doubles the buckets' width, merging each pair.
func (l *latencyData) widen() {
	l.width *= 2
	half := l.sketches[:(len(l.sketches)+1)/2]
	for i := range half {
		a := l.sketches[2*i]
		if 2*i+1 < len(l.sketches) {
			if b := l.sketches[2*i+1]; b != nil {
				if a == nil {
					a = b
				} else {
					a.MergeWith(b) // same mapping: no error
				}
			}
		}
		half[i] = a
	}
	clear(l.sketches[len(half):])
	l.sketches = half
}

// sampledNote says which outcomes the scatter shows sampled, for the caption; "" when none.
func (l *latencyData) sampledNote() string {
	var parts []string
	for _, g := range latencyGroups {
		if s := l.scatter[g.o]; s.stride > 1 {
			parts = append(parts, fmt.Sprintf("%s 1 in %d", g.name, s.stride))
		}
	}
	if parts == nil {
		return ""
	}
	out := " Sampled evenly in time:"
	for i, p := range parts {
		sep := ","
		if i == len(parts)-1 {
			sep = "."
		}
		out += " " + p + sep
	}
	return out
}

// quantileLine is the q-quantile of completed acquires' latency per interval (60 over the run, at
// least 100 ms; past maxPlotPoints acquires a power-of-two multiple of 100 ms, 30 to 60 over it).
func (l *latencyData) quantileLine(end int64, q float64) plotter.XYs {
	if l.sketches == nil {
		return exactQuantileLine(l.exact, end, q)
	}
	for l.width < end/60 {
		l.widen()
	}
	var pts plotter.XYs
	for i, s := range l.sketches {
		if s == nil || s.IsEmpty() {
			continue
		}
		v, err := s.GetValueAtQuantile(q)
		if err != nil {
			continue
		}
		pts = append(pts, plotter.XY{X: sec(int64(i)*l.width + l.width/2), Y: v})
	}
	return pts
}

func exactQuantileLine(ps []latPoint, end int64, q float64) plotter.XYs {
	width := max(end/60, minQuantileWidth)
	buckets := map[int64][]float64{}
	for _, p := range ps {
		buckets[p.inv/width] = append(buckets[p.inv/width], latencyMS(p.inv, p.inv+p.lat))
	}
	var pts plotter.XYs
	for _, k := range slices.Sorted(maps.Keys(buckets)) {
		v := buckets[k]
		sort.Float64s(v)
		pts = append(pts, plotter.XY{X: sec(k*width + width/2), Y: v[min(int(q*float64(len(v))), len(v)-1)]})
	}
	return pts
}

// rateBins count acquires per second of the run: invoked (every one), and completed by outcome at
// the second they were invoked.
type rateBins struct {
	total []float64
	by    [outcomes][]float64
}

func (r *rateBins) invoked(inv int64) {
	s := int(inv / 1e9)
	r.total = grow(r.total, s+1)
	r.total[s]++
}

func (r *rateBins) completed(out byte, inv int64) {
	s := int(inv / 1e9)
	r.by[out] = grow(r.by[out], s+1)
	r.by[out][s]++
}

// extend makes every series span the run, to its end.
func (r *rateBins) extend(end int64) {
	n := int(end/1e9) + 1
	r.total = grow(r.total, n)
	for i := range r.by {
		r.by[i] = grow(r.by[i], n)
	}
}

func grow(v []float64, n int) []float64 {
	if len(v) >= n {
		return v
	}
	return append(v, make([]float64, n-len(v))...)
}
