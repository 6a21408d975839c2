package checker

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"io"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// prepareVisualization runs porcupine once more, verbosely, on the segments worth drawing, and keeps
// the linearization info and model in r (step 7). On a small history that is every segment; on a
// large one (porcupine's page becomes unusable) only the segments that failed or hold a violation,
// up to maxOps operations.
func (r *Result) prepareVisualization(model porcupine.Model, holds []hold, segs []segment, segOf []int32, fs *foldSums, maxOps int, budget time.Duration) {
	// Folded segments were all ok, and folding left more operations than maxOps: none is drawn.
	total := fs.opCount()
	for i := range segs {
		total += segs[i].ops()
	}
	var chosen []int
	if total <= maxOps {
		for i := range segs {
			chosen = append(chosen, i)
		}
	} else {
		shown, skipped := 0, 0
		for i := range segs {
			s := &segs[i]
			if s.result != segIllegal && s.violations == 0 {
				continue
			}
			if shown+s.ops() > maxOps {
				skipped++
				continue
			}
			shown += s.ops()
			chosen = append(chosen, i)
		}
		r.visNote = fmt.Sprintf("the history has %d porcupine operations (more than %d), so the visualization shows only the %d segments that failed or contain a violation", total, maxOps, len(chosen))
		if skipped > 0 {
			r.visNote += fmt.Sprintf(" (%d more such segments did not fit)", skipped)
		}
		r.Notes = append(r.Notes, r.visNote)
	}

	var ops []porcupine.Operation
	lens := make([]int, len(chosen))
	lo, hi := int64(Never), int64(0)
	for i, si := range chosen {
		n := len(ops)
		ops = segmentOps(holds, &segs[si], ops)
		lens[i] = len(ops) - n
		for _, id := range segs[si].holds {
			lo, hi = min(lo, holds[id].Invoke), max(hi, holds[id].End)
		}
		if c := segs[si].carry; c != free {
			lo, hi = min(lo, segs[si].in), max(hi, holds[c].End)
		}
	}
	vm := model
	vm.Partition = partitionInto(lens)
	var info porcupine.LinearizationInfo
	if len(ops) > 0 {
		_, info = porcupine.CheckOperationsVerbose(vm, ops, budget)
	}

	chosenSet := make(map[int]bool, len(chosen))
	for _, si := range chosen {
		chosenSet[si] = true
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
	for _, v := range r.pairs {
		if !chosenSet[int(segmentOfPair(holds, segOf, v))] {
			continue
		}
		a, b := &holds[v.a], &holds[v.b]
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
