package workloads

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
)

// Hold-time distributions of the mutex workload, as recorded in the run's plan.
const (
	// HoldEdge draws each hold from the lease's own validity v (Deadline minus the acquire's
	// completion), the way slow critical sections behave: 60% uniform in [0, v/2], 30% in
	// [0.8v, v) (holds that end close to the deadline) and 10% in [v, 1.2v) (holds that overrun it,
	// reported as overruns). Bugs that shorten a lease live at its end, so the workload goes there.
	HoldEdge = "edge"
	// HoldUniform draws each hold uniformly from [HoldMin, HoldMax] (HoldMin is usually 0).
	HoldUniform = "uniform"
)

// HoldName is the distribution a Mutex draws its holds from.
func (m Mutex) HoldName() string {
	if m.HoldMax > 0 {
		return HoldUniform
	}
	return HoldEdge
}

// drawHold draws how long to work under a lease of validity v.
func (m Mutex) drawHold(rng *rand.Rand, v time.Duration) time.Duration {
	if m.HoldMax > 0 {
		// With no floor this is the draw it always was: a seed's holds stay the same.
		return m.HoldMin + randDuration(rng, m.HoldMax-m.HoldMin)
	}
	return edgeHold(rng, v)
}

// edgeHold is one draw of HoldEdge for validity v.
func edgeHold(rng *rand.Rand, v time.Duration) time.Duration {
	f := rng.Float64()
	switch {
	case f < 0.6:
		return time.Duration(rng.Float64() * 0.5 * float64(v))
	case f < 0.9:
		return time.Duration((0.8 + 0.2*rng.Float64()) * float64(v))
	default:
		return time.Duration((1 + 0.2*rng.Float64()) * float64(v))
	}
}

// carefulMargin is how far before its deadline a careful holder stops working: a twentieth of the
// TTL, so that its release, sent then, lands inside the lease.
func (m Mutex) carefulMargin() time.Duration { return max(m.TTL/20, time.Millisecond) }

// hold does the protected work under lease and returns the lease to release (renewed, when the
// workload extends) and whether the process must retire after releasing it (an extend's outcome was
// unknown).
func (m Mutex) hold(c *client, rng *rand.Rand, lease *locks.Lease) (*locks.Lease, bool) {
	if m.Extend {
		return m.holdExtending(c, rng, lease)
	}
	d := m.drawHold(rng, lease.Validity)
	if lease.Deadline.IsZero() && m.HoldMax == 0 {
		// No deadline: the lock renews the lease by itself for work of any length, which is what
		// watchdog locks are for. Holds are drawn across three lease times, as renewing holders'.
		d = 3 * m.drawHold(rng, max(m.Expiry, m.TTL))
	}
	if m.Careful && !lease.Deadline.IsZero() {
		// The client looks at what is left of its lease before it starts, as a careful user's code
		// would, and never plans work past the deadline less a margin.
		left := time.Until(lease.Deadline) - m.carefulMargin()
		if left <= 0 {
			return lease, false
		}
		d = min(d, left)
	}
	if m.Reentrant && lease.Depth > 0 {
		m.holdReentrant(c, rng, lease, d)
		return lease, false
	}
	c.work(lease, d)
	return lease, false
}

// holdExtending works for a time drawn across three validities, renewing the lease when a third of
// its validity is left. One renewal in five comes late, after the deadline (a holder that stalled, half
// of them by at most v/50, half by at most v/5):
// a correct lock refuses it, a lock that renews ended leases is caught by the checker. A renewal
// the lock refuses ends the work.
func (m Mutex) holdExtending(c *client, rng *rand.Rand, lease *locks.Lease) (*locks.Lease, bool) {
	v := lease.Validity
	left := 3 * edgeHold(rng, v)
	for left > 0 {
		until := time.Until(lease.Deadline)
		if left <= until-m.carefulMargin() {
			c.work(lease, left)
			return lease, false
		}
		chunk := max(until-v/3, 0)
		if rng.IntN(5) == 0 {
			// Stalled past the deadline: half just past it (where the servers may still hold the
			// key), half well past it (where another client may hold it).
			late := randDuration(rng, v/50)
			if rng.IntN(2) == 0 {
				late = randDuration(rng, v/5)
			}
			chunk = until + late
		}
		c.work(lease, chunk)
		if c.died() != nil {
			return lease, true // a dead process renews nothing
		}
		left -= chunk
		renewed, typ := c.extend(lease)
		switch typ {
		case history.OK:
			lease = renewed
		case history.Info:
			return lease, true
		default:
			return lease, false
		}
	}
	return lease, false
}

// group is the client group of process pid, as the harness assigns endpoints.
func (m Mutex) group(pid int) int {
	if m.Groups < 2 {
		return 0
	}
	return (pid % m.Clients) % m.Groups
}

// turns makes client groups take turns at each key: after a group wins a key, the next group has
// the first claim on it. Without turns a group on a slow link loses every race (the key is taken
// again within milliseconds of each release, long before its request arrives), so faults that only
// a slow client can exploit would never be exercised. A claim lapses after stale, so a group that
// cannot win (cut off) does not stop the others.
type turns struct {
	mu     sync.Mutex
	groups int
	stale  time.Duration
	next   map[string]int
	since  map[string]time.Time
}

func newTurns(groups int, stale time.Duration) *turns {
	return &turns{groups: groups, stale: stale, next: map[string]int{}, since: map[string]time.Time{}}
}

// mayTry reports whether group may ask for key now.
func (t *turns) mayTry(key string, group int) bool {
	if t == nil || t.groups < 2 {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	g, ok := t.next[key]
	return !ok || g == group || time.Since(t.since[key]) > t.stale
}

// won hands key's next turn to the group after group.
func (t *turns) won(key string, group int) {
	if t == nil || t.groups < 2 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next[key] = (group + 1) % t.groups
	t.since[key] = time.Now()
}
