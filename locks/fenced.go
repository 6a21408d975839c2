package locks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// fenced is the single-node lock that also hands out fencing tokens: one script sets the key and,
// only if it was set, increments a per-key token counter on the same node. Tokens increase as long
// as the node keeps its data; a restart without persistence resets the counter, and the checker
// reports the tokens that go backwards.
type fenced struct{ *single }

// TokenKey is the key of the token counter of lock key.
func TokenKey(key string) string { return "lockpick:token:" + key }

var fencedAcquireScript = redis.NewScript(`if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return redis.call("incr", KEYS[2]) else return 0 end`)

func newFenced(node Endpoint, o Options) *fenced { return &fenced{newSingle(node, o)} }

func (f *fenced) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	value := newValue()
	start := time.Now()
	rctx, cancel := nodeContext(ctx, f.opts.NodeTimeout)
	token, err := fencedAcquireScript.Run(rctx, f.client, []string{key, TokenKey(key)}, value, ttl.Milliseconds()).Int64()
	cancel()
	if unsent(err) {
		return nil, fmt.Errorf("%w: %s unreachable: %w", ErrNotAcquired, f.node.Node, err)
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, indeterminate(fmt.Errorf("fenced SET NX on %s: %w", f.node.Node, err))
	}
	if token == 0 {
		return nil, ErrHeld
	}
	now := time.Now()
	deadline := f.opts.deadline(start, ttl)
	if !deadline.After(now) {
		f.Release(ctx, &Lease{Key: key, Value: value})
		return nil, fmt.Errorf("%w: validity used up before the reply arrived", ErrNotAcquired)
	}
	return &Lease{Key: key, Value: value, Token: token, Start: start, Deadline: deadline, Validity: deadline.Sub(now), Nodes: []string{f.node.Node}}, nil
}
