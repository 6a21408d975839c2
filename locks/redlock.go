package locks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// redlock is the Redlock algorithm over N independent masters: SET NX PX on every node in parallel,
// granted when a majority agreed and validity is left after the time spent and the drift allowance.
type redlock struct {
	nodes   []Endpoint
	clients []*redis.Client
	opts    Options
	quorum  int
}

func newRedlock(nodes []Endpoint, o Options) *redlock {
	r := &redlock{nodes: nodes, opts: o, quorum: len(nodes)/2 + 1}
	for _, n := range nodes {
		r.clients = append(r.clients, newClient(n, o))
	}
	return r
}

// nodeResult is one node's answer to a round.
type nodeResult struct {
	granted bool
	err     error
}

// onAll runs f against every node in parallel, each bounded by the node timeout, and waits for all.
func (r *redlock) onAll(ctx context.Context, f func(ctx context.Context, c *redis.Client) (bool, error)) []nodeResult {
	res := make([]nodeResult, len(r.clients))
	var wg sync.WaitGroup
	for i, c := range r.clients {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, r.opts.NodeTimeout)
			defer cancel()
			ok, err := f(nctx, c)
			res[i] = nodeResult{granted: ok, err: err}
		})
	}
	wg.Wait()
	return res
}

func (r *redlock) tally(res []nodeResult) (granted []string, errs []error) {
	for i, nr := range res {
		switch {
		case nr.err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", r.nodes[i].Node, nr.err))
		case nr.granted:
			granted = append(granted, r.nodes[i].Node)
		}
	}
	return granted, errs
}

func (r *redlock) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	var last error
	for try := 0; try < r.opts.Tries; try++ {
		if try > 0 {
			// A random pause desynchronises clients that failed together, as the spec asks.
			d := r.opts.RetryDelay/2 + rand.N(r.opts.RetryDelay/2+1)
			select {
			case <-ctx.Done():
				return nil, indeterminate(ctx.Err())
			case <-time.After(d):
			}
		}
		value := newValue()
		start := time.Now()
		res := r.onAll(ctx, func(ctx context.Context, c *redis.Client) (bool, error) {
			return c.SetNX(ctx, key, value, ttl).Result()
		})
		now := time.Now()
		granted, errs := r.tally(res)
		deadline := r.opts.deadline(start, ttl)
		if len(granted) >= r.quorum && deadline.After(now) {
			return &Lease{Key: key, Value: value, Start: start, Deadline: deadline, Validity: deadline.Sub(now), Nodes: granted}, nil
		}
		// No quorum, or no validity left: undo on every node, including those that did not answer,
		// since their SET may have landed.
		r.Release(context.WithoutCancel(ctx), &Lease{Key: key, Value: value})
		switch {
		case len(granted)+len(errs) < r.quorum:
			// Even if every node that did not answer had granted, there would be no quorum: the
			// outcome is certain, whatever those nodes did.
			last = fmt.Errorf("%w: granted by %d of %d nodes (quorum %d)%s", ErrNotAcquired, len(granted), len(r.nodes), r.quorum, unanswered(errs))
		case len(errs) > 0:
			last = indeterminate(fmt.Errorf("granted by %d of %d nodes (quorum %d): %w", len(granted), len(r.nodes), r.quorum, errors.Join(errs...)))
		case len(granted) >= r.quorum:
			last = fmt.Errorf("%w: validity used up after %v", ErrNotAcquired, now.Sub(start))
		default:
			last = fmt.Errorf("%w: granted by %d of %d nodes (quorum %d)", ErrNotAcquired, len(granted), len(r.nodes), r.quorum)
		}
	}
	return nil, last
}

func unanswered(errs []error) string {
	if len(errs) == 0 {
		return ""
	}
	return fmt.Sprintf(", %d did not answer", len(errs))
}

func (r *redlock) Release(ctx context.Context, l *Lease) error {
	res := r.onAll(ctx, func(ctx context.Context, c *redis.Client) (bool, error) {
		n, err := releaseScript.Run(ctx, c, []string{l.Key}, l.Value).Int()
		return n == 1, err
	})
	released, errs := r.tally(res)
	if len(released) >= r.quorum {
		return nil
	}
	if len(errs) > 0 {
		return indeterminate(fmt.Errorf("released on %d of %d nodes: %w", len(released), len(r.nodes), errors.Join(errs...)))
	}
	return fmt.Errorf("%w: released on %d of %d nodes", ErrLeaseLost, len(released), len(r.nodes))
}

func (r *redlock) Extend(ctx context.Context, l *Lease, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	res := r.onAll(ctx, func(ctx context.Context, c *redis.Client) (bool, error) {
		n, err := extendScript.Run(ctx, c, []string{l.Key}, l.Value, ttl.Milliseconds()).Int()
		return n == 1, err
	})
	now := time.Now()
	extended, errs := r.tally(res)
	deadline := r.opts.deadline(start, ttl)
	if len(extended) >= r.quorum && deadline.After(now) {
		nl := *l
		nl.Start, nl.Deadline, nl.Validity, nl.Nodes = start, deadline, deadline.Sub(now), extended
		return &nl, nil
	}
	if len(errs) > 0 {
		return nil, indeterminate(fmt.Errorf("extended on %d of %d nodes: %w", len(extended), len(r.nodes), errors.Join(errs...)))
	}
	return nil, fmt.Errorf("%w: extended on %d of %d nodes", ErrLeaseLost, len(extended), len(r.nodes))
}

func (r *redlock) Close() error {
	var errs []error
	for _, c := range r.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
