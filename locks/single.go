package locks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// single is the lock on one Redis node: SET key value NX PX ttl, released by compare-and-delete.
type single struct {
	node   Endpoint
	client *redis.Client
	opts   Options
	// req bounds each request of Acquire and Release (nodeContext without an allocation): their
	// requests run one at a time, and go-redis keeps no request's context past its return.
	req Bound
	// nodes is what every lease names as its granting nodes: one list, never changed.
	nodes []string
}

func newSingle(node Endpoint, o Options) *single {
	return &single{node: node, client: newClient(node, o), opts: o, nodes: []string{node.Node}}
}

func (s *single) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	value := newValue()
	start := time.Now()
	ok, err := s.client.SetNX(s.req.Set(ctx, start.Add(s.opts.NodeTimeout)), key, value, ttl).Result()
	if unsent(err) {
		return nil, fmt.Errorf("%w: %s unreachable: %w", ErrNotAcquired, s.node.Node, err)
	}
	if err != nil {
		return nil, indeterminate(fmt.Errorf("SET NX on %s: %w", s.node.Node, err))
	}
	if !ok {
		return nil, ErrHeld
	}
	now := time.Now()
	deadline := s.opts.deadline(start, ttl)
	if !deadline.After(now) {
		// The reply came too late to use the lease: give it back and report a definite failure.
		s.Release(ctx, &Lease{Key: key, Value: value})
		return nil, fmt.Errorf("%w: validity used up before the reply arrived", ErrNotAcquired)
	}
	return &Lease{Key: key, Value: value, Start: start, Deadline: deadline, Validity: deadline.Sub(now), Nodes: s.nodes}, nil
}

func (s *single) Release(ctx context.Context, l *Lease) error {
	n, err := releaseScript.Run(s.req.Set(ctx, time.Now().Add(s.opts.NodeTimeout)), s.client, []string{l.Key}, l.Value).Int()
	if err != nil {
		return classify(fmt.Errorf("release on %s: %w", s.node.Node, err))
	}
	if n == 0 {
		return ErrLeaseLost
	}
	return nil
}

func (s *single) Extend(ctx context.Context, l *Lease, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	if err := stillValid(l, start); err != nil {
		return nil, err
	}
	rctx, cancel := nodeContext(ctx, s.opts.NodeTimeout)
	defer cancel()
	n, err := extendScript.Run(rctx, s.client, []string{l.Key}, l.Value, ttl.Milliseconds()).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, classify(fmt.Errorf("extend on %s: %w", s.node.Node, err))
	}
	if n == 0 {
		return nil, ErrLeaseLost
	}
	return renewed(l, s.opts, start, ttl, l.Nodes)
}

// DeadlineBounded implements DeadlineBounded: single waits on nothing but go-redis's requests.
func (s *single) DeadlineBounded() {}

// Warm implements Warmer.
func (s *single) Warm(ctx context.Context) error {
	return warm(ctx, []*redis.Client{s.client}, s.opts.NodeTimeout)
}

func (s *single) Close() error { return s.client.Close() }
