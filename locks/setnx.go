package locks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrCrashed is returned by a lock whose client died at a crash point (Options.Crash): the lock did
// nothing after it, as a killed process does nothing.
var ErrCrashed = errors.New("client crashed")

// CrashAfterSetNX is the crash point between setnx-del's SETNX and its EXPIRE: a client that dies
// there leaves a key without expiry, which no one can ever take again.
const CrashAfterSetNX CrashPoint = "after-setnx"

// ErrNoExtend is returned by Extend on locks that have no way to renew a lease.
var ErrNoExtend = errors.New("this lock has no extend")

// oneNode is a lock client of one Redis node: what the SETNX locks share.
type oneNode struct {
	node   Endpoint
	client *redis.Client
	opts   Options
}

func newOneNode(node Endpoint, o Options) oneNode {
	return oneNode{node: node, client: newClient(node, o), opts: o}
}

func (n *oneNode) Warm(ctx context.Context) error {
	return warm(ctx, []*redis.Client{n.client}, n.opts.NodeTimeout)
}

func (n *oneNode) Close() error { return n.client.Close() }

// setNX is SETNX with no expiry, its failures classified: unsent is a definite failure, anything
// else after the request may have been applied.
func (n *oneNode) setNX(ctx context.Context, key string, value any) (bool, error) {
	rctx, cancel := nodeContext(ctx, n.opts.NodeTimeout)
	defer cancel()
	ok, err := n.client.SetNX(rctx, key, value, 0).Result()
	if unsent(err) {
		return false, fmt.Errorf("%w: %s unreachable: %w", ErrNotAcquired, n.node.Node, err)
	}
	if err != nil {
		return false, indeterminate(fmt.Errorf("SETNX on %s: %w", n.node.Node, err))
	}
	return ok, nil
}

// del is a plain DEL of key: whoever holds it. A key already gone is ErrLeaseLost.
func (n *oneNode) del(ctx context.Context, key string) error {
	rctx, cancel := nodeContext(ctx, n.opts.NodeTimeout)
	defer cancel()
	deleted, err := n.client.Del(rctx, key).Result()
	if err != nil {
		return classify(fmt.Errorf("DEL on %s: %w", n.node.Node, err))
	}
	if deleted == 0 {
		return ErrLeaseLost
	}
	return nil
}

// noExtend is the Extend of locks that cannot renew a lease on request.
type noExtend struct{}

func (noExtend) Extend(context.Context, *Lease, time.Duration) (*Lease, error) {
	return nil, ErrNoExtend
}

// setnxDel is the naive lock people write first: SETNX, then EXPIRE as a second command, and a
// release by plain DEL. Between the two commands the key has no expiry; a client that dies there
// deadlocks the key. The release deletes whatever holds the key, the next holder's lease included.
type setnxDel struct {
	oneNode
	noExtend
}

func newSetnxDel(node Endpoint, o Options) *setnxDel { return &setnxDel{oneNode: newOneNode(node, o)} }

func (s *setnxDel) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	value := newValue()
	start := time.Now()
	ok, err := s.setNX(ctx, key, value)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrHeld
	}
	if err := s.opts.crashAt(CrashAfterSetNX); err != nil {
		return nil, err
	}
	rctx, cancel := nodeContext(ctx, s.opts.NodeTimeout)
	err = s.client.PExpire(rctx, key, ttl).Err()
	cancel()
	if err != nil {
		// The key is set, perhaps without expiry: the lock's state is unknown.
		return nil, indeterminate(fmt.Errorf("EXPIRE on %s after SETNX: %w", s.node.Node, err))
	}
	now := time.Now()
	deadline := s.opts.deadline(start, ttl)
	if !deadline.After(now) {
		s.Release(ctx, &Lease{Key: key, Value: value})
		return nil, fmt.Errorf("%w: validity used up before the reply arrived", ErrNotAcquired)
	}
	return &Lease{Key: key, Value: value, Start: start, Deadline: deadline, Validity: deadline.Sub(now), Nodes: []string{s.node.Node}}, nil
}

// Release deletes the key, whoever holds it.
func (s *setnxDel) Release(ctx context.Context, l *Lease) error { return s.del(ctx, l.Key) }

// setnxGetset is seed 002's lock, from the old SETNX documentation: the key holds the Unix time (by
// the client's clock, in milliseconds) at which the lock expires. SETNX takes a free lock; a taken
// one whose time has passed is taken over with GETSET, which wins only if the old value is still the
// expired one read before. No Redis expiry is set: the lock trusts every client's clock, and a
// client whose clock runs ahead sees a held lock as expired and takes it.
type setnxGetset struct {
	oneNode
	noExtend
}

func newSetnxGetset(node Endpoint, o Options) *setnxGetset {
	return &setnxGetset{oneNode: newOneNode(node, o)}
}

// expiry is the value this client writes: its clock's now + timeout + 1, in Unix milliseconds.
func (s *setnxGetset) expiry(ttl time.Duration) int64 {
	return s.opts.now().Add(ttl).UnixMilli() + 1
}

func (s *setnxGetset) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	mine := s.expiry(ttl)
	ok, err := s.setNX(ctx, key, mine)
	if err != nil {
		return nil, err
	}
	if !ok {
		if mine, err = s.takeOver(ctx, key, ttl); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	deadline := start.Add(ttl) // the promise, by the holder's own clock: timeout from the request
	if !deadline.After(now) {
		return nil, fmt.Errorf("%w: validity used up before the reply arrived", ErrNotAcquired)
	}
	return &Lease{Key: key, Value: strconv.FormatInt(mine, 10), Start: start, Deadline: deadline, Validity: deadline.Sub(now), Nodes: []string{s.node.Node}}, nil
}

// takeOver is the seed's second step: GET the stored time, and if it has passed by this client's
// clock, GETSET a new one; the lock is ours only if GETSET returned the expired time read before.
func (s *setnxGetset) takeOver(ctx context.Context, key string, ttl time.Duration) (int64, error) {
	rctx, cancel := nodeContext(ctx, s.opts.NodeTimeout)
	defer cancel()
	stored, err := s.client.Get(rctx, key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, ErrHeld // released meanwhile: the caller tries again from SETNX
	}
	if err != nil {
		return 0, fmt.Errorf("%w: GET on %s: %w", ErrNotAcquired, s.node.Node, err)
	}
	if stored >= s.opts.now().UnixMilli() {
		return 0, ErrHeld
	}
	mine := s.expiry(ttl)
	old, err := s.client.GetSet(rctx, key, mine).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, indeterminate(fmt.Errorf("GETSET on %s: %w", s.node.Node, err))
	}
	if old != stored {
		return 0, ErrHeld // another client took it over first
	}
	return mine, nil
}

// Release deletes the key only while this client's time has not passed, by its own clock: past
// it another client may hold the lock.
func (s *setnxGetset) Release(ctx context.Context, l *Lease) error {
	mine, err := strconv.ParseInt(l.Value, 10, 64)
	if err != nil {
		return fmt.Errorf("lease value %q is not a time: %w", l.Value, err)
	}
	if s.opts.now().UnixMilli() >= mine {
		return ErrLeaseLost
	}
	return s.del(ctx, l.Key)
}
