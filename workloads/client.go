package workloads

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
)

// client is one worker slot of a workload: its process id and its lock client, both renewed after
// an indeterminate result, as Jepsen reopens a crashed client. Lock operations run to completion even
// when the run ends; each is bounded by its own timeout.
type client struct {
	env     Env
	rec     *history.Recorder
	clients int
	ttl     time.Duration
	opCtx   context.Context
	// runCtx ends when the run's work ends: work under a lease stops there (it is released at
	// once) rather than keeping the whole run waiting for the longest hold.
	runCtx context.Context
	pid    int
	slot   int
	locker locks.Locker
	// deadlineOnly: the locker's operations end by their deadline alone (locks.DeadlineBounded).
	deadlineOnly bool
	// op bounds each operation of such a locker: the slot's operations run one at a time, and such
	// a lock keeps no operation's context past its return.
	op locks.Bound
	// procCtx ends with runCtx or when the current process's client program dies: a dead process
	// does no more work.
	procCtx    context.Context
	procCancel context.CancelFunc
	// healed: the death of the current process (if it died) has its heal recorded.
	healed bool
	deaths *deathTally
}

func newClient(ctx context.Context, env Env, slot, clients int, ttl time.Duration, deaths *deathTally) (*client, error) {
	c := &client{env: env, rec: env.Recorder, clients: clients, ttl: ttl, opCtx: context.WithoutCancel(ctx), runCtx: ctx, pid: slot, slot: slot, deaths: deaths}
	return c, c.open(ctx)
}

// open gives the slot a lock client for its current process id and warms it: the connections are
// made before the process's first operation, so a dial never counts against a request's timeout.
func (c *client) open(ctx context.Context) error {
	var err error
	if c.locker, err = c.env.NewLocker(c.pid); err != nil {
		return err
	}
	_, c.deadlineOnly = c.locker.(locks.DeadlineBounded)
	c.procCtx, c.procCancel = context.WithCancel(c.runCtx)
	c.healed = false
	c.watchDeath(c.procCancel)
	c.env.Faults.running(c.slot, c.pid, c.locker)
	if n, ok := c.locker.(locks.Notifier); ok {
		pid, rec := c.pid, c.rec
		n.Notify(func(e locks.LeaseEvent) { rec.Record(leaseEvent(pid, e, rec)) })
	}
	if w, ok := c.locker.(locks.Warmer); ok {
		w.Warm(ctx) // a node that does not answer now is the first acquire's problem, recorded there
	}
	return nil
}

// retire gives the slot a fresh process id and lock client. After a client program's death the
// new process is the death's heal, unless the run has seen more deaths than work (deathTally).
func (c *client) retire() error {
	c.locker.Close()
	c.procCancel()
	if b, ok := c.locker.(locks.Breakable); ok {
		if err := b.Broken(); err != nil {
			return err
		}
	}
	d, old := c.died(), c.pid
	if d != nil {
		if err := c.deaths.died(*d); err != nil {
			return err
		}
	}
	c.pid += c.clients
	if err := c.open(c.opCtx); err != nil {
		return err
	}
	if d != nil {
		c.restarted(old)
	}
	return nil
}

// crashes reports whether a client-crash nemesis kills this process at point.
func (c *client) crashes(point locks.CrashPoint) bool { return c.env.Faults.crashes(c.pid, point) }

// die is the process killed: its lock stops all it does in the background and releases nothing,
// and the slot goes on as a fresh process, as a restarted client program would.
func (c *client) die() error {
	if cr, ok := c.locker.(locks.Crashable); ok {
		cr.Crash()
	}
	return c.retire()
}

// leaseEvent is the history event of something the lock learned by itself.
func leaseEvent(pid int, e locks.LeaseEvent, rec *history.Recorder) history.Event {
	ev := history.Event{Type: history.Info, Process: pid, F: history.FRenewed, Key: e.Key, Value: e.Value}
	if e.Lost {
		ev.F = history.FLost
	}
	if !e.Deadline.IsZero() {
		ev.Deadline = rec.At(e.Deadline)
	}
	return ev
}

func (c *client) close() {
	if c.locker == nil {
		return
	}
	c.locker.Close()
	c.procCancel()
	if !c.healed && c.died() != nil {
		c.healed = true
		c.restarted(c.pid) // the run's work ended before the slot went on
	}
}

// acquire asks for key and records the operation. A nil lease means the lock was not granted; an
// indeterminate result has then retired the process. The error is the slot's own failure.
func (c *client) acquire(key string) (*locks.Lease, error) {
	if c.died() != nil {
		// Died between operations: the slot goes on as a fresh process first.
		if err := c.retire(); err != nil {
			return nil, err
		}
	}
	c.deaths.request()
	c.rec.Record(history.Event{Type: history.Invoke, Process: c.pid, F: history.FAcquire, Key: key})
	actx, cancel := c.bound()
	lease, err := c.locker.Acquire(actx, key, c.ttl)
	cancel()
	if err == locks.ErrHeld {
		// The plain refusal, most acquires at the ceiling: what the error checks below would find
		// (definite, reason held) without walking its chain four times.
		c.rec.Record(history.Event{Type: history.Fail, Process: c.pid, F: history.FAcquire, Key: key, Error: err.Error(), Reason: history.ReasonHeld})
		return nil, nil
	}
	if errors.Is(err, locks.ErrCrashed) {
		// Killed inside the acquire: what it did is unknown, and it does nothing more.
		c.rec.Record(history.Event{Type: history.Info, Process: c.pid, F: history.FAcquire, Key: key, Error: "client crashed: " + err.Error()})
		return nil, c.die()
	}
	if err != nil {
		ev := history.Event{Type: completion(err), Process: c.pid, F: history.FAcquire, Key: key, Error: err.Error()}
		if ev.Type == history.Fail {
			ev.Reason = reason(err)
		}
		c.rec.Record(ev)
		if locks.IsIndeterminate(err) {
			return nil, c.retire()
		}
		return nil, nil
	}
	if d := c.died(); d != nil {
		// Granted by a program the harness had already found dead: no process is left to hold it.
		c.rec.Record(history.Event{Type: history.Info, Process: c.pid, F: history.FAcquire, Key: key, Error: "the client program died as it answered (" + d.Exit + ")"})
		return nil, c.retire()
	}
	ev := history.Event{
		Type: history.OK, Process: c.pid, F: history.FAcquire, Key: key,
		Value: lease.Value, Token: lease.Token, Validity: int64(max(0, lease.Validity)), Nodes: lease.Nodes, Depth: lease.Depth,
	}
	// A library that counts its validity as time.Until(deadline) reports a negative one for a lease
	// that ended before its acquire returned (a paused node); the history says none was left, and
	// the deadline says it expired on arrival.
	if !lease.Deadline.IsZero() { // a watchdog lock promises no deadline: the hold lasts until release
		ev.Deadline = c.rec.At(lease.Deadline)
	}
	c.rec.Record(ev)
	return lease, nil
}

// bound bounds one lock operation of c by the TTL: by a deadline alone where the lock ends its
// operations by their deadline (locks.DeadlineBounded), else by a context with a timer.
func (c *client) bound() (context.Context, context.CancelFunc) {
	if c.deadlineOnly {
		return c.op.Set(c.opCtx, time.Now().Add(c.ttl)), func() {}
	}
	return context.WithTimeout(c.opCtx, c.ttl)
}

// release gives the lease back and records it. The process retires after an indeterminate release,
// or when the caller already saw an unknown outcome under the lease (retire).
func (c *client) release(lease *locks.Lease, retire bool) error {
	if c.died() != nil {
		return c.retire() // a dead process releases nothing
	}
	c.deaths.request()
	// A reentrant lock's release names the level it leaves: above 1 the hold goes on.
	c.rec.Record(history.Event{Type: history.Invoke, Process: c.pid, F: history.FRelease, Key: lease.Key, Value: lease.Value, Depth: lease.Depth})
	rctx, cancel := c.bound()
	err := c.locker.Release(rctx, lease)
	cancel()
	ev := history.Event{Type: history.OK, Process: c.pid, F: history.FRelease, Key: lease.Key, Value: lease.Value}
	if err != nil {
		ev.Type, ev.Error = completion(err), err.Error()
		if ev.Type == history.Fail {
			ev.Reason = lostReason(err)
		}
	}
	c.rec.Record(ev)
	if retire || locks.IsIndeterminate(err) {
		return c.retire()
	}
	return nil
}

// reason classifies a definite acquire failure: contention (held) or anything else (error).
func reason(err error) string {
	if locks.IsHeld(err) {
		return history.ReasonHeld
	}
	return history.ReasonError
}

// runSlots opens a warmed client for every slot, all of them before any slot starts work, then runs
// work once per slot, concurrently, and returns the first slot's error (see firstError). Opening first keeps the burst of
// connections at the start (a hundred clients dialling every node) away from the first operations,
// whose timeouts it would otherwise decide.
func runSlots(ctx context.Context, env Env, n int, ttl time.Duration, work func(ctx context.Context, c *client) error) error {
	clients := make([]*client, n)
	errs := make([]error, n)
	deaths := &deathTally{}
	var wg sync.WaitGroup
	for slot := range n {
		wg.Go(func() { clients[slot], errs[slot] = newClient(ctx, env, slot, n, ttl, deaths) })
	}
	wg.Wait()
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.close()
			}
		}
	}()
	if err := firstError(errs); err != nil {
		return err
	}
	if env.Ready != nil {
		env.Ready()
	}
	// A slot that fails (a broken client program) ends every slot's work: the run cannot go on.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for slot := range n {
		wg.Go(func() {
			if errs[slot] = work(wctx, clients[slot]); errs[slot] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return firstError(errs)
}

// firstError is the first of errs that is not nil, on one line with the count of the others: the
// slots of a run usually fail for one cause (a client program that cannot start), and one line
// names it.
func firstError(errs []error) error {
	var first error
	more := 0
	for _, err := range errs {
		switch {
		case err == nil:
		case first == nil:
			first = err
		default:
			more++
		}
	}
	if first != nil && more > 0 {
		return fmt.Errorf("%w (and %d more processes failed)", first, more)
	}
	return first
}

// work records protected work of length d under lease. A process whose client program died does
// no work; one that dies while it works stops there, and its work's outcome is unknown.
func (c *client) work(lease *locks.Lease, d time.Duration) {
	if c.died() != nil {
		return
	}
	c.rec.Record(history.Event{Type: history.Invoke, Process: c.pid, F: history.FWork, Key: lease.Key, Value: lease.Value})
	// A client-pause nemesis may stop the holder anywhere in its work, its lock's renewals with it.
	var pauses *Pauses
	if c.env.Faults != nil {
		pauses = c.env.Faults.Pauses
	}
	pauses.sleepHolding(c.pid, c.locker, d, c.procCtx.Done())
	if dd := c.died(); dd != nil {
		c.rec.Record(history.Event{Type: history.Info, Process: c.pid, F: history.FWork, Key: lease.Key, Value: lease.Value, Error: "the client program died (" + dd.Exit + ")"})
		return
	}
	c.rec.Record(history.Event{Type: history.OK, Process: c.pid, F: history.FWork, Key: lease.Key, Value: lease.Value})
}

// extend renews lease for the TTL and records it: ok with the renewed deadline, fail with reason
// lost (the lock said the lease was no longer held) or error, info when the outcome is unknown.
func (c *client) extend(lease *locks.Lease) (*locks.Lease, history.Type) {
	c.deaths.request()
	c.rec.Record(history.Event{Type: history.Invoke, Process: c.pid, F: history.FExtend, Key: lease.Key, Value: lease.Value})
	ectx, cancel := c.bound()
	renewed, err := c.locker.Extend(ectx, lease, c.ttl)
	cancel()
	if d := c.died(); err == nil && d != nil {
		err = &locks.IndeterminateError{Err: fmt.Errorf("the client program died as it answered (%s)", d.Exit)}
	}
	if err != nil {
		ev := history.Event{Type: completion(err), Process: c.pid, F: history.FExtend, Key: lease.Key, Value: lease.Value, Error: err.Error()}
		if ev.Type == history.Fail {
			ev.Reason = lostReason(err)
		}
		c.rec.Record(ev)
		return nil, ev.Type
	}
	c.rec.Record(history.Event{
		Type: history.OK, Process: c.pid, F: history.FExtend, Key: lease.Key, Value: lease.Value,
		Deadline: c.rec.At(renewed.Deadline), Validity: int64(max(0, renewed.Validity)), Nodes: renewed.Nodes,
	})
	return renewed, history.OK
}

// lostReason classifies a definite release or extend failure: the lease was no longer held (lost),
// or anything else (error).
func lostReason(err error) string {
	if errors.Is(err, locks.ErrLeaseLost) {
		return history.ReasonLost
	}
	return history.ReasonError
}
