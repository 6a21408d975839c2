package checker

import (
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// A folded hold its process can still reach keeps what can still change in it: here p0's lease
// is released near its deadline and folded, then an extend that p0 sent after the release comes
// back in time and moves the deadline, so the release is no longer near it; and p0's work goes on
// past the deadline after the fold (an overrun).
func TestFoldedHoldStillReachable(t *testing.T) {
	h := &hist{}
	h.acquire(0, "k", 10, 20, history.OK, "a", 1000)
	h.release(0, "k", "a", 950, 955)
	h.acquire(1, "k", 956, 958, history.OK, "b", 3000)
	h.add(history.Event{Type: history.Invoke, Process: 0, F: history.FExtend, Key: "k", Value: "a", Time: 957})
	h.add(history.Event{Type: history.OK, Process: 0, F: history.FExtend, Key: "k", Value: "a", Time: 970, Deadline: 1500})
	h.release(1, "k", "b", 980, 985)
	h.acquire(2, "k", 990, 995, history.OK, "c", 2000)
	h.work(2, "k", "c", 996, 2500)
	h.release(2, "k", "c", 2600, 2605)
	if n, _ := checkFolded(t, h.events(), Options{}, 1); n == 0 {
		t.Fatal("nothing was folded: the test shows nothing")
	}
}

// A folded segment's disagreement between porcupine and the sweep is named by its place among
// every segment, key by key, as a whole-history check names it: the segments of the keys before its
// own, folded or not, come first.
func TestFoldedDisagreementsTakeTheirWholePlace(t *testing.T) {
	holds := []hold{{key: "a"}, {key: "b"}, {key: "b"}, {key: "c"}}
	segs := []segment{{holds: []int32{0}}, {holds: []int32{1}}, {holds: []int32{2}}, {holds: []int32{3}}}
	fs := newFoldSums()
	fs.segsByKey = map[string]int{"a": 2, "b": 5, "c": 1}
	fs.findings.disagreements = []disagreement{{key: "a", index: 1}, {key: "b", index: 4}, {key: "c", index: 0}}
	got := fs.disagreements(holds, segs)
	// a: 2 folded + 1 unfolded before b; b: 5 folded + 2 unfolded before c.
	want := []int{1, 3 + 4, 3 + 7 + 0}
	for i, d := range got {
		if d.index != want[i] {
			t.Errorf("%s's disagreement is segment %d, want %d", d.key, d.index, want[i])
		}
	}
	// And an unfolded one of key b, the first of its unfolded segments (index 1 of segs), comes
	// after every folded segment of a and b: a's 3, b's 5.
	if i := fs.wholeIndex(1, "b"); i != 1+2+5 {
		t.Errorf("unfolded segment 1 of key b is segment %d, want 8", i)
	}
}
