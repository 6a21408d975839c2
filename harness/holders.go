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
	// watchers are told of every release invoked (nemesis.ReleaseWatcher).
	watchers map[chan struct{}]bool
}

func newHolders(groupOf func(process int) string) *holders {
	return &holders{groupOf: groupOf, key: map[int]string{}, held: map[int][]nemesis.Holder{}, watchers: map[chan struct{}]bool{}}
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
		for c := range h.watchers {
			select {
			case c <- struct{}{}:
			default: // one signal pending already
			}
		}
	}
}

// WatchReleases implements nemesis.ReleaseWatcher.
func (h *holders) WatchReleases() (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers[c] = true
	return c, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.watchers, c)
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
