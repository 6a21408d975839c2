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
	// faulted is len(fault) > 0, read on every acquire's completion without taking mu.
	faulted atomic.Bool
	monitor *checker.Monitor
	health  health

	mu    sync.Mutex
	fault map[string]string // node -> fault op in effect
	// latest is the last fault applied and when (history time), so that a fault healed between two
	// progress lines (a restart of 25ms) is still shown on the next; shown is when the last line was.
	latest      string
	latestAt    int64
	latestShown int64
}

func newStatus() *status { return &status{monitor: checker.NewMonitor(), fault: map[string]string{}} }

func (s *status) observe(e *history.Event) {
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
		s.faulted.Store(len(s.fault) > 0)
		if e.Effect != history.EffectHeal {
			s.latest, s.latestAt = strings.TrimSpace(e.F+" "+strings.Join(sortedCopy(e.Nodes), ",")), e.Time
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
	s.health.acquire(e.Time, e.Type == history.Info, s.faulted.Load())
}

// faults names the faults in effect at run time now; with none, the latest fault applied since the
// previous line, however briefly it lasted.
func (s *status) faults(now time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	since := s.latestShown
	s.latestShown = int64(now)
	if len(s.fault) == 0 {
		if s.latest != "" && s.latestAt >= since {
			return s.latest + " (healed)"
		}
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
	line := fmt.Sprintf("%5.1fs/%v  ops %d  ok acquires %d  findings: %s  fault: %s",
		t.Seconds(), total, s.ops.Load(), s.okAcquires.Load(), s.findings(), s.faults(t))
	if share, bad := s.health.now(t); bad {
		line += fmt.Sprintf("  OVERLOAD: %.0f%% of acquires timed out in the last %ds: raise --node-timeout (now %v)", share*100, healthWindow, nodeTimeout)
	}
	return line
}

// findings names the findings the live monitor has seen, in the checker's words: "none", or
// "2 pairs of overlapping holds, 1 early lease loss". The rest (stale writes, lost updates, token
// regressions, deadlocks) need the whole history and show in the verdict.
func (s *status) findings() string {
	var ts []checker.Tally
	for _, t := range []checker.Tally{
		{Kind: checker.FindingViolation, Count: s.monitor.Violations()},
		{Kind: checker.FindingEarlyLoss, Count: s.monitor.EarlyLosses()},
	} {
		if t.Count > 0 {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return "none"
	}
	return checker.Phrases(ts)
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
