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
