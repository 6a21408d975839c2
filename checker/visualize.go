package checker

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// prepareVisualization runs porcupine once more, verbosely, on the segments worth drawing, and keeps
// the linearization info and model in r (step 8). On a small history that is every segment; on a
// large one (porcupine's page becomes unusable) only the segments that failed or hold a violation,
// in order of their start while they fit in maxOps operations: the folds (fold.go) chose among
// theirs, and the unfolded segs come after them.
func (r *Result) prepareVisualization(p *parsed, segs []segment, maxOps int, budget time.Duration) {
	fs := p.folded
	total := fs.opCount()
	for i := range segs {
		total += segs[i].ops()
	}
	// Every segment, of the holds as they are: folding needs more operations than maxOps, so
	// nothing was folded.
	holds, chosen := p.holds, segs
	var drawnLive map[int]bool // nil: every segment
	if total > maxOps {
		fd := *fs.found()               // a copy: the choice goes on from the folds' without changing theirs
		drawn := slices.Clone(fd.drawn) // by absolute hold id
		var order []int
		order, drawnLive = fd.chooseDrawn(p.holds, segs, maxOps)
		for _, si := range order {
			drawn = append(drawn, absoluteSegment(segs[si], p.base))
		}
		holds, chosen = drawnHolds(p, drawn)
		r.visNote = fmt.Sprintf("the history has %d porcupine operations (more than %d), so the visualization shows only the %d segments that failed or contain a violation", total, maxOps, len(chosen))
		if fd.skipped > 0 {
			r.visNote += fmt.Sprintf(" (%d more such segments did not fit)", fd.skipped)
		}
		r.Notes = append(r.Notes, r.visNote)
	}

	var ops []porcupine.Operation
	lens := make([]int, len(chosen))
	lo, hi := int64(Never), int64(0)
	for i := range chosen {
		n := len(ops)
		ops = segmentOps(holds, &chosen[i], ops)
		lens[i] = len(ops) - n
		for _, id := range chosen[i].holds {
			lo, hi = min(lo, holds[id].Invoke), max(hi, holds[id].End)
		}
		if c := chosen[i].carry; c != free {
			lo, hi = min(lo, chosen[i].in), max(hi, holds[c].End)
		}
	}
	vm := lockModel(holds)
	vm.Partition = partitionInto(lens)
	var info porcupine.LinearizationInfo
	if len(ops) > 0 {
		_, info = porcupine.CheckOperationsVerbose(vm, ops, budget)
	}

	var notes []porcupine.Annotation
	for _, f := range r.Faults {
		if len(chosen) < len(segs)+fs.segCount() && (f.End < lo || f.Start > hi) {
			continue // outside everything drawn; it would only stretch the timeline
		}
		notes = append(notes, porcupine.Annotation{
			Tag:             "fault: " + f.Fault,
			Start:           f.Start,
			End:             f.End,
			Description:     strings.TrimSpace(f.F + " " + strings.Join(f.Nodes, " ")),
			Details:         f.describe(),
			BackgroundColor: "#fde68a",
		})
	}
	for _, lp := range r.pairs {
		if lp.seg >= 0 && drawnLive != nil && !drawnLive[int(lp.seg)] || lp.seg < 0 && !lp.drawn {
			continue
		}
		a, b := p.at(lp.a), p.at(lp.b)
		notes = append(notes, porcupine.Annotation{
			Tag:             "violations",
			Start:           max(a.Start, b.Start),
			End:             min(a.End, b.End),
			Description:     fmt.Sprintf("p%d and p%d overlap", a.Process, b.Process),
			Details:         fmt.Sprintf("key %s: %s and %s", a.key, describeHold(a.info()), describeHold(b.info())),
			BackgroundColor: "#fca5a5",
		})
	}
	if r.visNote != "" {
		at := lo
		if len(chosen) == 0 {
			at = 0
		}
		notes = append(notes, porcupine.Annotation{Tag: "lockpick", Start: at, Description: "partial view", Details: r.visNote})
	}
	info.AddAnnotations(notes)
	r.model, r.info, r.visualize = vm, info, true
}

// drawnHolds are the holds of the chosen segments (by absolute id), as they are now, with the
// segments renumbered into them: the model the page is drawn with keeps these, not every hold of
// the run.
func drawnHolds(p *parsed, chosen []segment) ([]hold, []segment) {
	var holds []hold
	index := map[int32]int32{}
	local := func(id int32) int32 {
		if id == free {
			return free
		}
		i, ok := index[id]
		if !ok {
			i = int32(len(holds))
			index[id] = i
			holds = append(holds, *p.at(id))
		}
		return i
	}
	out := make([]segment, len(chosen))
	for i, s := range chosen {
		ids := make([]int32, len(s.holds))
		for j, id := range s.holds {
			ids[j] = local(id)
		}
		s.holds, s.carry, s.cut = ids, local(s.carry), local(s.cut)
		out[i] = s
	}
	return holds, out
}

// Visualize writes porcupine's HTML visualization of the checked holds, with fault windows and
// violations drawn as annotations. It works only on a Result returned by Check.
func (r *Result) Visualize(w io.Writer) error {
	if !r.visualize {
		return errors.New("visualize: result carries no linearization info (it was not produced by Check)")
	}
	var buf bytes.Buffer
	if err := porcupine.Visualize(r.model, r.info, &buf); err != nil {
		return fmt.Errorf("visualize: %w", err)
	}
	if _, err := w.Write(withBanner(buf.Bytes(), r.visNote)); err != nil {
		return fmt.Errorf("visualize: %w", err)
	}
	return nil
}

// partitionInto cuts a visualized history back into the segments it was built from, lens[i]
// operations each, so porcupine draws every segment as its own partition.
func partitionInto(lens []int) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(h []porcupine.Operation) [][]porcupine.Operation {
		parts := make([][]porcupine.Operation, 0, len(lens))
		for _, n := range lens {
			n = min(n, len(h))
			parts = append(parts, h[:n:n])
			h = h[n:]
		}
		return parts
	}
}

// withBanner puts lockpick's note at the top of a porcupine page, when there is one.
func withBanner(page []byte, note string) []byte {
	if note == "" {
		return page
	}
	banner := `<body><p style="font-family:sans-serif;background:#fef3c7;padding:6px;margin-top:40px">lockpick: ` + html.EscapeString(note) + `</p>`
	return bytes.Replace(page, []byte("<body>"), []byte(banner), 1)
}
