package locks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zeromicro/go-zero/core/breaker"
)

// goZeroKeepalive is go-zero's RedisLock renewed the way its maintainers describe: Acquire called
// again on the same RedisLock is the keepalive (the script refreshes the key while it holds the
// lock's id). After the key expired, the same call runs SET NX PX and answers true whenever the key
// is free, so a holder that stalled past its lease is told it still holds, whoever held in between.
type goZeroKeepalive struct {
	*goZero
}

func newGoZeroKeepalive(node Endpoint, o Options) (Locker, error) {
	g, err := newGoZero(node, o, false)
	if err != nil {
		return nil, err
	}
	return goZeroKeepalive{g.(*goZero)}, nil
}

// Extend is AcquireCtx on the lease's RedisLock: its id, SetExpire set to ttl. The renewed lease promises
// SetExpire's seconds from the send, as Acquire's does.
func (g goZeroKeepalive) Extend(ctx context.Context, l *Lease, ttl time.Duration) (*Lease, error) {
	g.mu.Lock()
	rl := g.locks[l.Value]
	g.mu.Unlock()
	if rl == nil {
		return nil, fmt.Errorf("%w: this client took no lease %s on %s", ErrLeaseLost, l.Value, l.Key)
	}
	if ttl < time.Second || ttl%time.Second != 0 {
		return nil, fmt.Errorf("go-zero's SetExpire takes whole seconds, not a TTL of %v", ttl)
	}
	rl.SetExpire(goZeroSeconds(ttl))
	start := time.Now()
	ok, err := rl.AcquireCtx(ctx)
	switch {
	case err != nil && (unsent(err) || errors.Is(err, breaker.ErrServiceUnavailable)):
		return nil, fmt.Errorf("keepalive on %s: %w", g.node.Node, err)
	case err != nil:
		return nil, indeterminate(fmt.Errorf("keepalive on %s: %w", g.node.Node, err))
	case !ok:
		return nil, fmt.Errorf("%w: keepalive on %s: another id holds the key", ErrLeaseLost, g.node.Node)
	}
	nl := *l
	nl.Deadline = start.Add(time.Duration(goZeroSeconds(ttl)) * time.Second)
	nl.Validity = time.Until(nl.Deadline)
	return &nl, nil
}
