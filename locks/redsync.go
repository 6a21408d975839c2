package locks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// redsyncLock is github.com/go-redsync/redsync/v4, Redlock over N masters, each reached through the
// library's goredis/v9 pool around a go-redis client of its own. Every operation builds a Mutex as a
// user would (WithExpiry, WithTries, and WithValue to release or extend a lease it took).
//
// What it promises: Mutex.Until(), which the library computes as the round's start plus the expiry
// less expiry x driftFactor (0.01), with no constant term. The adapter takes that as the deadline.
type redsyncLock struct {
	nodes   []Endpoint
	clients []*redis.Client
	rs      *redsync.Redsync
	opts    Options
	quorum  int
	// setNX: redsync-setnx-extend, the mutexes take WithSetNXOnExtend (redsync#149): Extend sets the
	// key again with SET NX PX where it no longer holds the lease's value.
	setNX bool
}

func newRedsync(nodes []Endpoint, o Options) (Locker, error) { return openRedsync(nodes, o, false) }

func newRedsyncSetNX(nodes []Endpoint, o Options) (Locker, error) { return openRedsync(nodes, o, true) }

func openRedsync(nodes []Endpoint, o Options, setNX bool) (Locker, error) {
	r := &redsyncLock{nodes: nodes, opts: o, quorum: len(nodes)/2 + 1, setNX: setNX}
	pools := make([]redsyncredis.Pool, 0, len(nodes))
	for _, n := range nodes {
		c := newClient(n, o)
		r.clients = append(r.clients, c)
		pools = append(pools, goredis.NewPool(c))
	}
	r.rs = redsync.New(pools...)
	return r, nil
}

// mutex is the library's Mutex for key; value names a lease taken before (empty for a new one).
func (r *redsyncLock) mutex(key string, ttl time.Duration, value string) *redsync.Mutex {
	opts := []redsync.Option{redsync.WithExpiry(ttl), redsync.WithTries(r.opts.Tries)}
	if value != "" {
		opts = append(opts, redsync.WithValue(value))
	}
	if r.setNX {
		opts = append(opts, redsync.WithSetNXOnExtend())
	}
	return r.rs.NewMutex(key, opts...)
}

func (r *redsyncLock) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	m := r.mutex(key, ttl, "")
	if err := m.LockContext(ctx); err != nil {
		return nil, r.acquireError(err)
	}
	return r.lease(key, m, ttl), nil
}

// lease is the lease m holds. Until() counts from the round's start inside the library, a little
// after the call began: the lease starts there.
func (r *redsyncLock) lease(key string, m *redsync.Mutex, ttl time.Duration) *Lease {
	until := m.Until()
	start := until.Add(-(ttl - time.Duration(int64(float64(ttl)*redsyncDrift))))
	return &Lease{Key: key, Value: m.Value(), Start: start, Deadline: until, Validity: time.Until(until)}
}

// redsyncDrift is the library's default driftFactor, which the adapter keeps.
const redsyncDrift = 0.01

// redsyncTally counts what the library's joined error says about each node: taken by another
// value (or already expired, on release), failed before the request left, or failed with the
// outcome unknown.
type redsyncTally struct {
	taken, expired int
	unsent         []error
	unknown        []error
	taker          bool // the library answered ErrTaken: a quorum of nodes hold another value
}

func tallyRedsync(err error) redsyncTally {
	var t redsyncTally
	var walk func(error)
	walk = func(err error) {
		var re *redsync.RedisError
		var taken *redsync.ErrTaken
		switch j, ok := err.(interface{ Unwrap() []error }); {
		case ok:
			for _, e := range j.Unwrap() {
				walk(e)
			}
		case errors.As(err, &taken):
			t.taker = true
			t.taken += len(taken.Nodes)
		case errors.As(err, &re):
			if unsent(re.Err) {
				t.unsent = append(t.unsent, re)
			} else {
				t.unknown = append(t.unknown, re)
			}
		case errors.Is(err, redsync.ErrLockAlreadyExpired):
			t.expired++
		default:
			var nt *redsync.ErrNodeTaken
			if errors.As(err, &nt) {
				t.taken++
			} else if err != nil {
				t.unknown = append(t.unknown, err)
			}
		}
	}
	walk(err)
	return t
}

// acquireError classifies a failed LockContext. The library returns ErrFailed when a quorum granted
// but no validity was left (it then releases), ErrTaken when a quorum holds another value, and
// otherwise the last round's per-node errors joined.
func (r *redsyncLock) acquireError(err error) error {
	n := len(r.nodes)
	if errors.Is(err, redsync.ErrFailed) {
		return fmt.Errorf("%w: %w", ErrNotAcquired, err)
	}
	t := tallyRedsync(err)
	granted := n - t.taken - len(t.unsent) - len(t.unknown)
	switch {
	case t.taker || granted+len(t.unknown) < r.quorum && t.taken > n-r.quorum:
		return fmt.Errorf("%w: %w", ErrHeld, err)
	case granted+len(t.unknown) < r.quorum:
		return fmt.Errorf("%w: %w", ErrNotAcquired, err)
	default:
		return indeterminate(err)
	}
}

func (r *redsyncLock) Release(ctx context.Context, l *Lease) error {
	ok, err := r.mutex(l.Key, time.Second, l.Value).UnlockContext(ctx)
	if ok {
		return nil
	}
	return r.lostOrUnknown("release", err)
}

// lostOrUnknown classifies a release or extend that reached no quorum: unknown when a node's outcome
// is unknown, a plain failure when some node could not be asked, else the lease is gone.
func (r *redsyncLock) lostOrUnknown(op string, err error) error {
	t := tallyRedsync(err)
	switch {
	case len(t.unknown) > 0:
		return indeterminate(fmt.Errorf("%s: %w", op, err))
	case len(t.unsent) > 0:
		return fmt.Errorf("%s: %w", op, err)
	default:
		return fmt.Errorf("%w: %s: %w", ErrLeaseLost, op, err)
	}
}

// Extend is the library's ExtendContext: PEXPIRE where the value is still ours, the validity
// recomputed by the library from the extend's start. It renews whatever the servers still hold,
// whether or not the lease's own validity had ended; the checker reports a late renewal.
func (r *redsyncLock) Extend(ctx context.Context, l *Lease, ttl time.Duration) (*Lease, error) {
	m := r.mutex(l.Key, ttl, l.Value)
	ok, err := m.ExtendContext(ctx)
	switch {
	case ok:
		nl := *r.lease(l.Key, m, ttl)
		nl.Nodes, nl.Token = l.Nodes, l.Token
		return &nl, nil
	case errors.Is(err, redsync.ErrExtendFailed):
		return nil, fmt.Errorf("extend confirmed after the validity it would give was used up: %w", err)
	}
	return nil, r.lostOrUnknown("extend", err)
}

// Warm implements Warmer.
func (r *redsyncLock) Warm(ctx context.Context) error {
	return warm(ctx, r.clients, r.opts.NodeTimeout)
}

func (r *redsyncLock) Close() error {
	var errs []error
	for _, c := range r.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
