package locks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
)

// bsmSharedToken is the token every client of the bsm-redislock-token lock passes as Options.Token,
// as services do that name the lock's owner by their service name, with the instance in
// Options.Metadata.
const bsmSharedToken = "lockpick-service"

// bsmRedislockToken is bsm/redislock with a custom Options.Token shared by every client. The
// library's obtain script falls back, when SET NX fails, to a plain SET PX over a key whose value
// begins with the same token (meant to let an owner obtain again what it holds), so a second client
// with the token takes over a lease another one holds, and both hold it. docs/bugs.md has the row.
type bsmRedislockToken struct {
	*bsmRedislock
}

func newBsmRedislockToken(node Endpoint, o Options) (Locker, error) {
	return &bsmRedislockToken{bsmRedislock: newBsmRedislock(node, o)}, nil
}

// Acquire obtains key with the shared token and this lease's own metadata; the lease is named by
// the whole value, token and metadata.
func (b *bsmRedislockToken) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, b.opts.NodeTimeout)
	lock, err := b.rl.Obtain(rctx, key, ttl, &redislock.Options{Token: bsmSharedToken, Metadata: newValue()})
	cancel()
	switch {
	case errors.Is(err, redislock.ErrNotObtained):
		return nil, fmt.Errorf("%w: %w", ErrHeld, err)
	case err != nil && unsent(err):
		return nil, fmt.Errorf("%w: %s unreachable: %w", ErrNotAcquired, b.node.Node, err)
	case err != nil:
		return nil, indeterminate(fmt.Errorf("obtain on %s: %w", b.node.Node, err))
	}
	value := lock.Token() + lock.Metadata()
	b.mu.Lock()
	b.held[value] = lock
	b.mu.Unlock()
	deadline := start.Add(ttl)
	return &Lease{Key: key, Value: value, Start: start, Deadline: deadline, Validity: time.Until(deadline), Nodes: []string{b.node.Node}}, nil
}
