package workloads

import (
	"context"
	"errors"
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
	pid     int
	locker  locks.Locker
}

func newClient(ctx context.Context, env Env, slot, clients int, ttl time.Duration) (*client, error) {
	c := &client{env: env, rec: env.Recorder, clients: clients, ttl: ttl, opCtx: context.WithoutCancel(ctx), pid: slot}
	var err error
	c.locker, err = env.NewLocker(c.pid)
	return c, err
}

// retire gives the slot a fresh process id and lock client.
func (c *client) retire() error {
	c.locker.Close()
	c.pid += c.clients
	var err error
	c.locker, err = c.env.NewLocker(c.pid)
	return err
}

func (c *client) close() {
	if c.locker != nil {
		c.locker.Close()
	}
}

// acquire asks for key and records the operation. A nil lease means the lock was not granted; an
// indeterminate result has then retired the process. The error is the slot's own failure.
func (c *client) acquire(key string) (*locks.Lease, error) {
	c.rec.Record(history.Event{Type: history.Invoke, Process: c.pid, F: history.FAcquire, Key: key})
	actx, cancel := context.WithTimeout(c.opCtx, c.ttl)
	lease, err := c.locker.Acquire(actx, key, c.ttl)
	cancel()
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
	c.rec.Record(history.Event{
		Type: history.OK, Process: c.pid, F: history.FAcquire, Key: key,
		Value: lease.Value, Token: lease.Token, Deadline: c.rec.At(lease.Deadline),
		Validity: int64(lease.Validity), Nodes: lease.Nodes,
	})
	return lease, nil
}

// release gives the lease back and records it. The process retires after an indeterminate release,
// or when the caller already saw an unknown outcome under the lease (retire).
func (c *client) release(lease *locks.Lease, retire bool) error {
	c.rec.Record(history.Event{Type: history.Invoke, Process: c.pid, F: history.FRelease, Key: lease.Key, Value: lease.Value})
	rctx, cancel := context.WithTimeout(c.opCtx, c.ttl)
	err := c.locker.Release(rctx, lease)
	cancel()
	ev := history.Event{Type: history.OK, Process: c.pid, F: history.FRelease, Key: lease.Key, Value: lease.Value}
	if err != nil {
		ev.Type, ev.Error = completion(err), err.Error()
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

// runSlots runs work once per slot, concurrently, and joins their errors.
func runSlots(n int, work func(slot int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for slot := range n {
		wg.Go(func() { errs[slot] = work(slot) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
