package workloads

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
)

// holdReentrant is a hold of a reentrant lock (its lease reports a depth): half the time the holder
// enters the lock again in the middle of its work, works under the inner level, and leaves it, as
// nested critical sections of one thread do. The work lasts d in all.
func (m Mutex) holdReentrant(c *client, rng *rand.Rand, lease *locks.Lease, d time.Duration) {
	if rng.IntN(2) == 0 {
		c.work(lease, d)
		return
	}
	before, inside := time.Duration(rng.Float64()*float64(d)/2), time.Duration(rng.Float64()*float64(d)/2)
	c.work(lease, before)
	if c.died() != nil {
		return // the process died holding: its release retires it
	}
	inner, err := c.acquire(lease.Key)
	if err != nil || inner == nil {
		// Refused (or unknown) for the owner: the checker sees it; the outer hold goes on.
		c.work(lease, d-before)
		return
	}
	c.work(inner, inside)
	if c.died() != nil {
		return
	}
	c.release(inner, false)
	c.work(lease, d-before-inside)
}

// foreignUnlock is a release of key by a process that does not hold it, as a bug in a caller that
// unlocks in a finally block after a failed tryLock would make. A lock must refuse it: one that
// accepts it may free another client's lock. Recorded as a release naming no lease of the process;
// a refusal is reason not-owner.
func (c *client) foreignUnlock(key string) error {
	if c.died() != nil {
		return c.retire()
	}
	c.deaths.request()
	c.rec.Record(history.Event{Type: history.Invoke, Process: c.pid, F: history.FRelease, Key: key})
	rctx, cancel := c.bound()
	err := c.locker.Release(rctx, &locks.Lease{Key: key})
	cancel()
	ev := history.Event{Type: history.OK, Process: c.pid, F: history.FRelease, Key: key}
	switch {
	case errors.Is(err, locks.ErrLeaseLost):
		ev.Type, ev.Reason, ev.Error = history.Fail, history.ReasonNotOwner, err.Error()
	case err != nil:
		ev.Type, ev.Error = completion(err), err.Error()
		if ev.Type == history.Fail {
			ev.Reason = history.ReasonError
		}
	}
	c.rec.Record(ev)
	if locks.IsIndeterminate(err) {
		return c.retire()
	}
	return nil
}
