package harness

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
)

// status follows the history as it is written, for the live progress line and the overload check.
type status struct {
	ops        atomic.Int64
	okAcquires atomic.Int64
	monitor    *checker.Monitor
	health     health

	mu    sync.Mutex
	fault map[string]string // node -> fault op in effect
}

func newStatus() *status { return &status{monitor: checker.NewMonitor(), fault: map[string]string{}} }

func (s *status) observe(e history.Event) {
	s.monitor.Observe(e)
	if e.IsNemesis() {
		if e.Type != history.Invoke {
			return
		}
		s.mu.Lock()
		for _, n := range e.Nodes {
			if e.Effect == history.EffectHeal {
				delete(s.fault, n)
			} else {
				s.fault[n] = e.F
			}
		}
		s.mu.Unlock()
		return
	}
	if e.Process < 0 || !e.IsCompletion() {
		return
	}
	s.ops.Add(1)
	if e.F != history.FAcquire {
		return
	}
	if e.Type == history.OK {
		s.okAcquires.Add(1)
	}
	s.mu.Lock()
	faulted := len(s.fault) > 0
	s.mu.Unlock()
	s.health.acquire(e.Time, e.Type == history.Info, faulted)
}

func (s *status) faults() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fault) == 0 {
		return "none"
	}
	byOp := map[string][]string{}
	for n, f := range s.fault {
		byOp[f] = append(byOp[f], n)
	}
	var parts []string
	for f, ns := range byOp {
		parts = append(parts, f+" "+strings.Join(sortedCopy(ns), ","))
	}
	return strings.Join(sortedCopy(parts), "; ")
}

// line is the progress line at run time t.
func (s *status) line(t, total, nodeTimeout time.Duration) string {
	line := fmt.Sprintf("%5.1fs/%v  ops %d  ok acquires %d  violations %d  fault: %s",
		t.Seconds(), total, s.ops.Load(), s.okAcquires.Load(), s.monitor.Violations(), s.faults())
	if share, bad := s.health.now(t); bad {
		line += fmt.Sprintf("  OVERLOAD: %.0f%% of acquires timed out in the last %ds: raise --node-timeout (now %v)", share*100, healthWindow, nodeTimeout)
	}
	return line
}

// show prints the progress line every half second until the returned stop is called.
func (s *status) show(w io.Writer, start time.Time, total, nodeTimeout time.Duration) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
				fmt.Fprint(w, "\r\033[K"+s.line(time.Since(start), total, nodeTimeout))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
