package harness

import (
	"slices"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/nemesis"
)

// holders follows the grants and releases of the history as it is written and tells the nemeses
// which processes hold a lock now, and through which client group (nemesis.HolderView): a
// partition with group=holder cuts that group. It sees only the history, never the workload.
type holders struct {
	groupOf func(process int) string

	mu    sync.Mutex
	start time.Time
	key   map[int]string           // process -> key of its acquire in flight
	held  map[int][]nemesis.Holder // process -> its grants not yet released
	// onRelease are called at every release invoked (nemesis.ReleaseWatcher).
	onRelease map[int]func()
	nextWatch int
}

func newHolders(groupOf func(process int) string) *holders {
	return &holders{groupOf: groupOf, key: map[int]string{}, held: map[int][]nemesis.Holder{}, onRelease: map[int]func(){}}
}

// begin sets the run clock's start, which event times count from.
func (h *holders) begin(start time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.start = start
}

// observe takes the next event of the history. A hold starts at its grant and ends at its
// release's invoke, as the checker counts it; a reentrant lock's inner levels change nothing.
func (h *holders) observe(e *history.Event) {
	if e.Process < 0 || e.Depth > 1 || (e.F != history.FAcquire && e.F != history.FRelease) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case e.F == history.FAcquire && e.Type == history.Invoke:
		h.key[e.Process] = e.Key
	case e.F == history.FAcquire && e.Type == history.OK:
		key := e.Key
		if key == "" {
			key = h.key[e.Process]
		}
		delete(h.key, e.Process)
		h.held[e.Process] = append(h.held[e.Process], nemesis.Holder{
			Process: e.Process, Group: h.groupOf(e.Process), Key: key, Since: h.start.Add(time.Duration(e.Time)),
		})
	case e.F == history.FAcquire:
		delete(h.key, e.Process)
	case e.F == history.FRelease && e.Type == history.Invoke:
		// An emptied list is kept: its process's next grant reuses it rather than allocating.
		h.held[e.Process] = slices.DeleteFunc(h.held[e.Process], func(x nemesis.Holder) bool { return e.Key == "" || x.Key == e.Key })
		for _, f := range h.onRelease {
			f() // under h.mu: f must not ask for the holders (the failover's stall only signals)
		}
	}
}

// OnRelease implements nemesis.ReleaseWatcher. The history's recorder calls observe, and so f, as
// it records the release's invoke, before the releasing client sends the release; f runs with the
// holders locked, so it must not call Holders.
func (h *holders) OnRelease(f func()) (stop func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.nextWatch
	h.nextWatch++
	h.onRelease[id] = f
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.onRelease, id)
	}
}

// Holders implements nemesis.HolderView.
func (h *holders) Holders() []nemesis.Holder {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []nemesis.Holder
	for _, hs := range h.held {
		out = append(out, hs...)
	}
	return out
}
