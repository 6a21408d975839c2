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
			nctx, cancel := nodeContext(ctx, r.opts.NodeTimeout)
			defer cancel()
			ok, err := f(nctx, c)
			res[i] = nodeResult{granted: ok, err: err}
		})
	}
	wg.Wait()
	return res
}

// tally is one round's answers: the nodes that granted, how many answered no, the errors of nodes
// whose request certainly never left (unsent), and the errors that leave a node's outcome unknown.
type tally struct {
	granted []string
	refused int
	unsent  []error
	unknown []error
}

func (r *redlock) tally(res []nodeResult) tally {
	var t tally
	for i, nr := range res {
		switch {
		case nr.err != nil && unsent(nr.err):
			t.unsent = append(t.unsent, fmt.Errorf("%s: %w", r.nodes[i].Node, nr.err))
		case nr.err != nil:
			t.unknown = append(t.unknown, fmt.Errorf("%s: %w", r.nodes[i].Node, nr.err))
		case nr.granted:
			t.granted = append(t.granted, r.nodes[i].Node)
		default:
			t.refused++
		}
	}
	return t
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
		t := r.tally(res)
		deadline := r.opts.deadline(start, ttl)
		if len(t.granted) >= r.quorum && deadline.After(now) {
			return &Lease{Key: key, Value: value, Start: start, Deadline: deadline, Validity: deadline.Sub(now), Nodes: t.granted}, nil
		}
		// No quorum, or no validity left: undo on every node that granted it or did not answer,
		// since their SET may have landed.
		r.undo(context.WithoutCancel(ctx), key, value, res)
		last = r.failure(t, now.Sub(start))
	}
	return nil, last
}

// failure is the error of a round that granted no lease.
func (r *redlock) failure(t tally, took time.Duration) error {
	n, granted := len(r.nodes), len(t.granted)
	switch {
	case granted+len(t.unknown) < r.quorum && t.refused > n-r.quorum:
		// The nodes that said the key is taken deny a quorum on their own: contention.
		return fmt.Errorf("%w: taken on %d of %d nodes, granted by %d (quorum %d)%s", ErrHeld, t.refused, n, granted, r.quorum, unanswered(t))
	case granted+len(t.unknown) < r.quorum:
		// Even if every node whose outcome is unknown had granted, there would be no quorum: the
		// outcome is certain, whatever those nodes did.
		return fmt.Errorf("%w: granted by %d of %d nodes (quorum %d), taken on %d%s", ErrNotAcquired, granted, n, r.quorum, t.refused, unanswered(t))
	case len(t.unknown) > 0:
		return indeterminate(fmt.Errorf("granted by %d of %d nodes (quorum %d): %w", granted, n, r.quorum, errors.Join(t.unknown...)))
	default:
		return fmt.Errorf("%w: validity used up after %v", ErrNotAcquired, took)
	}
}

func unanswered(t tally) string {
	var s string
	if len(t.unsent) > 0 {
		s += fmt.Sprintf(", %d unreachable", len(t.unsent))
	}
	if len(t.unknown) > 0 {
		s += fmt.Sprintf(", %d did not answer", len(t.unknown))
	}
	return s
}

// undo gives back a round that won no lease, on each node that granted it and each that did not
// answer. A node that refused it holds nothing of this round, so Redlock's "unlock every instance"
// would only ask it a compare-and-delete that must answer 0: at a hot key, where most rounds are
// refused everywhere, that was five round trips per failed acquire for nothing.
func (r *redlock) undo(ctx context.Context, key, value string, res []nodeResult) {
	var wg sync.WaitGroup
	for i, c := range r.clients {
		if !res[i].granted && res[i].err == nil {
			continue
		}
		wg.Go(func() {
			nctx, cancel := nodeContext(ctx, r.opts.NodeTimeout)
			defer cancel()
			releaseScript.Run(nctx, c, []string{key}, value)
		})
	}
	wg.Wait()
}

func (r *redlock) Release(ctx context.Context, l *Lease) error {
	res := r.onAll(ctx, func(ctx context.Context, c *redis.Client) (bool, error) {
		n, err := releaseScript.Run(ctx, c, []string{l.Key}, l.Value).Int()
		return n == 1, err
	})
	t := r.tally(res)
	if len(t.granted) >= r.quorum {
		return nil
	}
	if len(t.unknown) > 0 {
		return indeterminate(fmt.Errorf("released on %d of %d nodes: %w", len(t.granted), len(r.nodes), errors.Join(t.unknown...)))
	}
	if len(t.unsent) > 0 {
		return fmt.Errorf("released on %d of %d nodes: %w", len(t.granted), len(r.nodes), errors.Join(t.unsent...))
	}
	return fmt.Errorf("%w: released on %d of %d nodes", ErrLeaseLost, len(t.granted), len(r.nodes))
}

// Extend renews the lease on every node with compare-and-pexpire and keeps it when a quorum
// renewed it, with the validity recomputed from the renewal's start, as an acquire's is.
func (r *redlock) Extend(ctx context.Context, l *Lease, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	if err := stillValid(l, start); err != nil {
		return nil, err
	}
	res := r.onAll(ctx, func(ctx context.Context, c *redis.Client) (bool, error) {
		n, err := extendScript.Run(ctx, c, []string{l.Key}, l.Value, ttl.Milliseconds()).Int()
		return n == 1, err
	})
	t := r.tally(res)
	if len(t.granted) >= r.quorum {
		return renewed(l, r.opts, start, ttl, t.granted)
	}
	if len(t.granted)+len(t.unknown) >= r.quorum {
		return nil, indeterminate(fmt.Errorf("extended on %d of %d nodes: %w", len(t.granted), len(r.nodes), errors.Join(t.unknown...)))
	}
	if len(t.unsent)+len(t.unknown) > 0 {
		// Some nodes could not be asked: whether they still hold the lease is unknown, so this is
		// no proof that the lease was lost.
		return nil, fmt.Errorf("extended on %d of %d nodes (quorum %d)%s", len(t.granted), len(r.nodes), r.quorum, unanswered(t))
	}
	return nil, fmt.Errorf("%w: extended on %d of %d nodes", ErrLeaseLost, len(t.granted), len(r.nodes))
}

// Warm implements Warmer.
func (r *redlock) Warm(ctx context.Context) error { return warm(ctx, r.clients, r.opts.NodeTimeout) }

func (r *redlock) Close() error {
	var errs []error
	for _, c := range r.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
