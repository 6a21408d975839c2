package workloads

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/systems"
)

// Runs the workload against a real node that is stopped (requests time out: unknown outcomes), then
// killed and restarted (connections refused: definite errors), and checks the history it records:
// every operation completes, holds are recorded whole (acquire, work, release), a process that saw
// an indeterminate result never acts again under its old id, and every failed acquire says whether
// the lock was held or in error.
func TestMutexRecordsWellFormedHistory(t *testing.T) {
	c, err := systems.StartLocal(context.Background(), systems.LocalConfig{Nodes: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	path := filepath.Join(t.TempDir(), history.FileName)
	rec, err := history.Create(path, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	node := c.Nodes()[0]
	var seen grants
	env := Env{Recorder: rec, NewLocker: func(int) (locks.Locker, error) {
		l, err := locks.New("single", []locks.Endpoint{{Node: node.Name, Addr: node.Addr()}}, locks.Options{NodeTimeout: 50 * time.Millisecond})
		return counting{Locker: l, seen: &seen}, err
	}}
	m := Mutex{Clients: 4, Keys: 2, TTL: 400 * time.Millisecond, Seed: 1}
	// Each fault starts once the clients have seen the last one's effect, and the run ends once they
	// have seen them all: a loaded machine makes it slower, not weaker (issue 28). The minute is
	// only a bound on a hang.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stopped atomic.Int64 // when the choreography ended the run, in Unix nanoseconds
	go func() {
		defer cancel()
		wait := func(n *atomic.Int64) bool {
			for was := n.Load(); n.Load() == was; time.Sleep(5 * time.Millisecond) {
				if ctx.Err() != nil {
					return false
				}
			}
			return true
		}
		for range 3 { // a few grants before any fault
			if !wait(&seen.ok) {
				return
			}
		}
		c.Signal(node.Name, syscall.SIGSTOP)
		ok := wait(&seen.unknown) // a request timed out on the stopped node
		c.Signal(node.Name, syscall.SIGCONT)
		if !ok || !wait(&seen.ok) {
			return
		}
		c.Kill(node.Name)
		ok = wait(&seen.refused) // an acquire refused by the dead node
		c.Start(context.Background(), node.Name)
		if !ok || !wait(&seen.ok) {
			return
		}
		stopped.Store(time.Now().UnixNano())
	}()
	if err := m.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	if stopped.Load() == 0 {
		t.Fatalf("the clients did not see every fault within a minute: %d grants, %d unknown, %d refused", seen.ok.Load(), seen.unknown.Load(), seen.refused.Load())
	}
	if over := time.Since(time.Unix(0, stopped.Load())); over > m.TTL+m.TTL/2 {
		t.Fatalf("the workload took %v past its deadline to stop", over)
	}
	rec.Close()
	evs, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	type state struct {
		inflight *history.Event
		lease    string // value of the lease held, until its release completes
		retired  bool
	}
	procs := map[int]*state{}
	var oks, infos int
	reasons := map[string]int{}
	for i := range evs {
		e := evs[i]
		s := procs[e.Process]
		if s == nil {
			s = &state{}
			procs[e.Process] = s
		}
		if s.retired {
			t.Fatalf("process %d acted after an info: %+v", e.Process, e)
		}
		if e.Type == history.Invoke {
			if s.inflight != nil {
				t.Fatalf("process %d invoked %s with %s in flight", e.Process, e.F, s.inflight.F)
			}
			if (e.F == history.FWork || e.F == history.FRelease) && e.Value != s.lease {
				t.Fatalf("process %d: %s of a lease it does not hold: %+v", e.Process, e.F, e)
			}
			s.inflight = &evs[i]
			continue
		}
		if s.inflight == nil || s.inflight.F != e.F {
			t.Fatalf("process %d: completion %+v without its invoke", e.Process, e)
		}
		s.inflight = nil
		switch {
		case e.F == history.FAcquire && e.Type == history.OK:
			oks++
			if e.Value == "" || e.Deadline <= e.Time || e.Validity <= 0 || len(e.Nodes) != 1 {
				t.Fatalf("ok acquire without a usable lease: %+v", e)
			}
			s.lease = e.Value
		case e.F == history.FAcquire && e.Type == history.Fail:
			reasons[e.Reason]++
		case e.F == history.FRelease:
			s.lease = ""
		}
		if e.Type == history.Info {
			infos++
			s.retired = true
		}
	}
	for p, s := range procs {
		if s.inflight != nil || s.lease != "" {
			t.Fatalf("process %d ended with an operation in flight or a lease unreleased", p)
		}
	}
	if oks < 5 {
		t.Fatalf("only %d ok acquires", oks)
	}
	if infos == 0 {
		t.Fatal("stopping the node produced no indeterminate result: the test proved nothing about retired ids")
	}
	if reasons[history.ReasonHeld] == 0 || reasons[history.ReasonError] == 0 || len(reasons) != 2 {
		t.Fatalf("failed acquires by reason %v: want some held (contention), some error (the node was down), nothing else", reasons)
	}
}

// A pause request catches the first process at its pause point and holds it until resumed.
func TestPausesCatchAndResume(t *testing.T) {
	p := NewPauses()
	p.point(1) // nothing armed: no wait
	var passes, stop atomic.Int64
	go func() {
		for stop.Load() == 0 {
			p.point(3)
			passes.Add(1)
		}
	}()
	defer stop.Store(1)
	pid, resume, err := p.Catch(context.Background(), nil)
	if err != nil || pid != 3 {
		t.Fatalf("caught p%d (%v), want p3", pid, err)
	}
	before := passes.Load()
	time.Sleep(50 * time.Millisecond)
	if passes.Load() != before {
		t.Fatal("the caught process went on before it was resumed")
	}
	resume()
	for passes.Load() == before {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := p.Catch(ctx, nil); err == nil {
		t.Error("Catch with a cancelled context must fail")
	}
}

// A pause of the mutex workload catches the holder the nemesis picks among those working under a
// lease, wherever it is in its work, and the paused time does not count as work done. The pause
// (1 s) is long enough that a loaded machine's late wake-ups are not taken for it.
func TestPausesCatchThePickedHolder(t *testing.T) {
	p := NewPauses()
	done := map[int]chan time.Time{2: make(chan time.Time, 1), 5: make(chan time.Time, 1)}
	start := time.Now()
	for pid, ch := range done {
		go func() { p.sleepHolding(pid, nil, 200*time.Millisecond, nil); ch <- time.Now() }()
	}
	time.Sleep(50 * time.Millisecond)
	pid, resume, err := p.Catch(context.Background(), func(n int) int { return n - 1 })
	if err != nil || pid != 5 {
		t.Fatalf("caught p%d (%v), want p5: the last of the holders in process order", pid, err)
	}
	time.Sleep(time.Second)
	resume()
	if d := (<-done[2]).Sub(start); d > 900*time.Millisecond {
		t.Errorf("p2, not paused, worked %v, want about 200ms", d)
	}
	if d := (<-done[5]).Sub(start); d < 1180*time.Millisecond {
		t.Errorf("p5 finished %v after it began: its 1s pause must not count as work", d)
	}
}

// Work under a lease ends when the run's work does, with or without a pause nemesis, so a run does
// not wait on its longest hold after its time is up.
func TestWorkEndsWithTheRun(t *testing.T) {
	for _, p := range []*Pauses{nil, NewPauses()} {
		done := make(chan struct{})
		time.AfterFunc(50*time.Millisecond, func() { close(done) })
		start := time.Now()
		p.sleepHolding(1, nil, 5*time.Second, done)
		if d := time.Since(start); d > time.Second {
			t.Errorf("pauses %v: work of 5s went on %v after the run ended at 50ms", p != nil, d)
		}
	}
}

// grants counts what the workload's clients got from the lock.
type grants struct{ ok, unknown, refused atomic.Int64 }

// counting is a Locker that counts its acquires' outcomes in seen, so that the test moves to the
// next fault when the clients have seen the last one.
type counting struct {
	locks.Locker
	seen *grants
}

func (c counting) Acquire(ctx context.Context, key string, ttl time.Duration) (*locks.Lease, error) {
	l, err := c.Locker.Acquire(ctx, key, ttl)
	switch {
	case err == nil:
		c.seen.ok.Add(1)
	case locks.IsIndeterminate(err):
		c.seen.unknown.Add(1)
	case !locks.IsHeld(err):
		c.seen.refused.Add(1)
	}
	return l, err
}

// Warm passes the harness's warm-up on, as the workload would call it on the lock itself.
func (c counting) Warm(ctx context.Context) error {
	if w, ok := c.Locker.(locks.Warmer); ok {
		return w.Warm(ctx)
	}
	return nil
}
