package workloads

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/resource"
)

// Counter is the counter workload: each process acquires a lock key, reads that key's counter from
// the resource, writes the value plus one through the resource's guard, and releases. The write is
// made whatever the lease's remaining validity: a process paused between its read and its write
// does not know it was paused, which is the case Kleppmann's argument is about.
//
// Reads and writes are recorded with the lock key as Key; the write carries the lease's token.
// Work after the deadline shows as an overrun because the checker counts reads and writes as work.
type Counter struct {
	Clients int
	Keys    int
	TTL     time.Duration
	// ThinkMax bounds the pause between a process's operations. Default 20ms.
	ThinkMax time.Duration
	// OpTimeout bounds each read and write on the resource. Default TTL/4.
	OpTimeout time.Duration
	Seed      uint64
	// Store is the resource; shared by every process.
	Store *resource.Store
	// Pauses, if not nil, lets the client-pause nemesis stop a process between its read and write.
	Pauses *Pauses
	// Prefix goes before every key name, as Mutex.Prefix.
	Prefix string
	// Extend makes a process renew its lease between its read and its write (after the pause point)
	// and write only if the renewal is ok: the application's "is the lock still mine?" check before
	// it commits. A lock that renews a lease which has ended tells a stalled holder yes.
	Extend bool
}

// Run drives the processes until ctx is done; each finishes its current lock cycle first.
func (c Counter) Run(ctx context.Context, env Env) error {
	if c.Clients < 1 || c.Keys < 1 || c.TTL <= 0 || c.Store == nil {
		return fmt.Errorf("counter workload: clients, keys, ttl and a resource store are required")
	}
	if c.ThinkMax <= 0 {
		c.ThinkMax = 20 * time.Millisecond
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = c.TTL / 4
	}
	return runSlots(ctx, env, c.Clients, c.TTL, func(ctx context.Context, cl *client) error { return c.process(ctx, env, cl) })
}

func (c Counter) process(ctx context.Context, env Env, cl *client) error {
	rng := rand.New(rand.NewPCG(c.Seed, uint64(cl.pid)+1))
	// Spread the processes' first requests, as the mutex workload does.
	sleep(ctx, randDuration(rng, c.ThinkMax))
	for ctx.Err() == nil {
		key := c.Prefix + KeyName(rng.IntN(c.Keys))
		lease, err := cl.acquire(key)
		if err != nil {
			return err
		}
		if lease == nil {
			sleep(ctx, randDuration(rng, c.ThinkMax))
			continue
		}
		if cl.crashes(CrashHolding) {
			if err := cl.die(); err != nil {
				return err
			}
			continue
		}

		// An unknown resource outcome retires the process id, as an unknown lock outcome does.
		retire, renewed := c.update(cl.opCtx, env.Recorder, cl, lease)
		if renewed != nil {
			lease = renewed
		}

		if err := cl.release(lease, retire); err != nil {
			return err
		}
		sleep(ctx, randDuration(rng, c.ThinkMax))
	}
	return nil
}

// update is the read-modify-write under the lease. It reports whether an outcome was unknown, and
// the lease a renewal before the write gave (nil without one).
func (c Counter) update(ctx context.Context, rec *history.Recorder, cl *client, lease *locks.Lease) (unknown bool, renewed *locks.Lease) {
	pid, lock, key, token := cl.pid, cl.locker, lease.Key, lease.Token
	guard := c.Store.Guard()
	rec.Record(history.Event{Type: history.Invoke, Process: pid, F: history.FRead, Key: key, Token: token})
	rctx, cancel := context.WithTimeout(ctx, c.OpTimeout)
	v, err := c.Store.Read(rctx, key, token)
	cancel()
	if err != nil {
		// A plain read changes nothing, so a failed one is a definite non-effect; a read that
		// registers its token may have done so, an unknown outcome that retires the process.
		ev := history.Event{Type: history.Fail, Process: pid, F: history.FRead, Key: key, Token: token, Error: err.Error()}
		if guard.Registers(token) {
			ev.Type = history.Info
		}
		rec.Record(ev)
		return ev.Type == history.Info, nil
	}
	rec.Record(history.Event{Type: history.OK, Process: pid, F: history.FRead, Key: key, Token: token, Value: strconv.FormatInt(v, 10)})

	c.Pauses.pointWith(pid, lock)
	if m, ok := lock.(locks.Mortal); ok && m.Died() != nil {
		return true, nil // the process died before its write: it writes nothing
	}
	if c.Extend {
		switch l, typ := cl.extend(lease); typ {
		case history.OK:
			renewed = l
		case history.Info:
			return true, nil // the lease's state is unknown: the process writes nothing and retires
		default:
			return false, nil // the lock is no longer ours: no write
		}
	}

	next := strconv.FormatInt(v+1, 10)
	rec.Record(history.Event{Type: history.Invoke, Process: pid, F: history.FWrite, Key: key, Value: next, Token: token, Guard: string(guard)})
	wctx, cancel := context.WithTimeout(ctx, c.OpTimeout)
	err = c.Store.Write(wctx, key, v+1, token, v)
	cancel()
	ev := history.Event{Type: history.OK, Process: pid, F: history.FWrite, Key: key, Value: next, Token: token, Guard: string(guard)}
	switch {
	case errors.Is(err, resource.ErrRejected):
		ev.Type, ev.Error = history.Fail, err.Error()
	case err != nil:
		ev.Type, ev.Error = history.Info, err.Error()
		unknown = true
	}
	rec.Record(ev)
	return unknown, renewed
}

// Pauses lets the client-pause nemesis stop processes, as a stop-the-world garbage collection
// would. A goroutine cannot be stopped from outside, so the workload cooperates. The counter
// workload's processes pass a pause point between their read and their write, and a pause request
// catches the first process that comes by (Kleppmann's case). The mutex workload's holders listen for
// a pause all through their work; a pause picks one of the processes holding right then (the
// nemesis's seeded pick) and stops it where it is.
type Pauses struct {
	req chan pauseReq

	mu      sync.Mutex
	holders map[int]chan pauseReq // process -> its channel, while it works under a lease
}

type pauseReq struct {
	caught chan int
	resume chan struct{}
}

// NewPauses makes the rendezvous between the nemesis and the workload.
func NewPauses() *Pauses { return &Pauses{req: make(chan pauseReq), holders: map[int]chan pauseReq{}} }

// Catch stops a process and returns its id and resume, which lets it go on (resume may be called
// more than once). When processes are working under a lease, pick (given how many) chooses which
// of them, in order of process id; otherwise the first process at its pause point is caught.
func (p *Pauses) Catch(ctx context.Context, pick func(n int) int) (int, func(), error) {
	r := pauseReq{caught: make(chan int, 1), resume: make(chan struct{})}
	var once sync.Once
	resume := func() { once.Do(func() { close(r.resume) }) }
	for {
		if ch, ok := p.pickHolder(pick); ok {
			select {
			case ch <- r:
				return <-r.caught, resume, nil
			case <-ctx.Done():
				return 0, nil, ctx.Err()
			case <-time.After(time.Millisecond):
				continue // its work ended first: pick again
			}
		}
		select {
		case p.req <- r:
			return <-r.caught, resume, nil
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// pickHolder chooses one of the processes working under a lease.
func (p *Pauses) pickHolder(pick func(n int) int) (chan pauseReq, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.holders) == 0 || pick == nil {
		return nil, false
	}
	pids := slices.Sorted(maps.Keys(p.holders))
	return p.holders[pids[pick(len(pids))]], true
}

// sleepHolding is d of work by process pid under a lease, during which a pause may stop it (and
// its lock's background renewals) wherever it is; paused time does not count as work done. It ends
// early when done closes (the run's work is over).
func (p *Pauses) sleepHolding(pid int, lock locks.Locker, d time.Duration, done <-chan struct{}) {
	if d < minPause {
		return
	}
	if p == nil {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-done:
		}
		return
	}
	ch := make(chan pauseReq)
	p.mu.Lock()
	p.holders[pid] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.holders, pid)
		p.mu.Unlock()
	}()
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			return
		}
		t := time.NewTimer(left)
		select {
		case <-t.C:
			return
		case <-done:
			t.Stop()
			return
		case r := <-ch:
			t.Stop()
			stopped := time.Now()
			p.hold(pid, lock, r)
			end = end.Add(time.Since(stopped))
		}
	}
}

// hold keeps process pid stopped for request r, its lock's background work with it.
func (p *Pauses) hold(pid int, lock locks.Locker, r pauseReq) {
	pl, _ := lock.(locks.Pausable)
	if pl != nil {
		pl.Pause()
	}
	r.caught <- pid
	<-r.resume
	if pl != nil {
		pl.Resume()
	}
}

// point is the pause point. Without a waiting request it costs one non-blocking channel receive.
func (p *Pauses) point(pid int) { p.pointWith(pid, nil) }

// pointWith is point for a process whose lock has background work of its own (a watchdog): the
// lock is paused with the process, as SIGSTOP stops every thread.
func (p *Pauses) pointWith(pid int, lock locks.Locker) {
	if p == nil {
		return
	}
	select {
	case r := <-p.req:
		p.hold(pid, lock, r)
	default:
	}
}
