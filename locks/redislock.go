package locks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// bsmRedislock is github.com/bsm/redislock on one master: Obtain (SET NX PX in a script, no retry),
// Release, Refresh. The library computes no validity; its documentation says the lock expires after
// the TTL, so the lease's deadline is the TTL counted from the send of the Obtain (the key cannot
// expire earlier on a node whose clock runs at the rate of the client's).
type bsmRedislock struct {
	node   Endpoint
	client *redis.Client
	rl     *redislock.Client
	opts   Options
	// obtain are the options each Obtain passes; nil for the library's own (a random token).
	obtain func() *redislock.Options

	mu   sync.Mutex
	held map[string]*redislock.Lock // lease value -> the library's lock
}

func newBsmRedislock(node Endpoint, o Options) *bsmRedislock {
	c := newClient(node, o)
	return &bsmRedislock{node: node, client: c, rl: redislock.New(c), opts: o, held: map[string]*redislock.Lock{}}
}

func (b *bsmRedislock) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, b.opts.NodeTimeout)
	var opt *redislock.Options
	if b.obtain != nil {
		opt = b.obtain()
	}
	lock, err := b.rl.Obtain(rctx, key, ttl, opt)
	cancel()
	switch {
	case errors.Is(err, redislock.ErrNotObtained):
		return nil, fmt.Errorf("%w: %w", ErrHeld, err)
	case err != nil && unsent(err):
		return nil, fmt.Errorf("%w: %s unreachable: %w", ErrNotAcquired, b.node.Node, err)
	case err != nil:
		return nil, indeterminate(fmt.Errorf("obtain on %s: %w", b.node.Node, err))
	}
	// The lease is named by the whole value the key holds: the token and any metadata.
	value := lock.Token() + lock.Metadata()
	b.mu.Lock()
	b.held[value] = lock
	b.mu.Unlock()
	deadline := start.Add(ttl)
	return &Lease{Key: key, Value: value, Start: start, Deadline: deadline, Validity: time.Until(deadline), Nodes: []string{b.node.Node}}, nil
}

// lock is the library's lock of lease l.
func (b *bsmRedislock) lock(l *Lease) (*redislock.Lock, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if lock := b.held[l.Value]; lock != nil {
		return lock, nil
	}
	return nil, fmt.Errorf("%w: this client took no lease %s on %s", ErrLeaseLost, l.Value, l.Key)
}

func (b *bsmRedislock) Release(ctx context.Context, l *Lease) error {
	lock, err := b.lock(l)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, b.opts.NodeTimeout)
	defer cancel()
	err = lock.Release(rctx)
	if err == nil || errors.Is(err, redislock.ErrLockNotHeld) {
		b.mu.Lock()
		delete(b.held, l.Value)
		b.mu.Unlock()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redislock.ErrLockNotHeld):
		return fmt.Errorf("%w: %w", ErrLeaseLost, err)
	}
	return classify(fmt.Errorf("release on %s: %w", b.node.Node, err))
}

// Extend is the library's Refresh: PEXPIRE while the value is still ours, the new validity the TTL
// from the refresh's send.
func (b *bsmRedislock) Extend(ctx context.Context, l *Lease, ttl time.Duration) (*Lease, error) {
	lock, err := b.lock(l)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, b.opts.NodeTimeout)
	defer cancel()
	switch err := lock.Refresh(rctx, ttl, nil); {
	case errors.Is(err, redislock.ErrNotObtained):
		return nil, fmt.Errorf("%w: %w", ErrLeaseLost, err)
	case err != nil:
		return nil, classify(fmt.Errorf("refresh on %s: %w", b.node.Node, err))
	}
	nl := *l
	nl.Start, nl.Deadline = start, start.Add(ttl)
	nl.Validity = time.Until(nl.Deadline)
	return &nl, nil
}

// Warm implements Warmer.
func (b *bsmRedislock) Warm(ctx context.Context) error {
	return warm(ctx, []*redis.Client{b.client}, b.opts.NodeTimeout)
}

func (b *bsmRedislock) Close() error { return b.client.Close() }
