package locks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zeromicro/go-zero/core/breaker"
	zredis "github.com/zeromicro/go-zero/core/stores/redis"
)

// goZeroNested is go-zero's RedisLock kept by a service, one per key, and acquired again by nested
// code that already holds it. go-zero's lock script refreshes the key when it holds this
// RedisLock's id and answers true (go-zero#4319: its maintainers describe Acquire on a held lock
// as a refresh), so the nested section is entered, and its Release deletes the key while the
// outer section still runs: another client takes the lock under it. The Depth the lease reports
// is the caller's own count of the Acquires that answered true: go-zero counts nothing.
type goZeroNested struct {
	noExtend
	inner *goZero
	mu    sync.Mutex
	held  map[string]*goZeroHeld // key -> the RedisLock this client holds it with
}

// goZeroHeld is a key this client holds: its RedisLock, the lease value and the nesting depth.
type goZeroHeld struct {
	rl    *zredis.RedisLock
	value string
	depth int
}

func newGoZeroNested(node Endpoint, o Options) (Locker, error) {
	g, err := newGoZero(node, o, false)
	if err != nil {
		return nil, err
	}
	return &goZeroNested{inner: g.(*goZero), held: map[string]*goZeroHeld{}}, nil
}

func (g *goZeroNested) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	if ttl < time.Second || ttl%time.Second != 0 {
		return nil, fmt.Errorf("go-zero's SetExpire takes whole seconds, not a TTL of %v", ttl)
	}
	seconds := goZeroSeconds(ttl)
	g.mu.Lock()
	h := g.held[key]
	g.mu.Unlock()
	fresh := h == nil
	if fresh {
		rl := zredis.NewRedisLock(g.inner.store, key)
		rl.SetExpire(seconds)
		h = &goZeroHeld{rl: rl, value: newValue()}
	}
	start := time.Now()
	ok, err := h.rl.AcquireCtx(ctx)
	switch {
	case err != nil && (unsent(err) || errors.Is(err, breaker.ErrServiceUnavailable)):
		return nil, fmt.Errorf("%w: %s: %w", ErrNotAcquired, g.inner.node.Node, err)
	case err != nil:
		return nil, indeterminate(fmt.Errorf("acquire on %s: %w", g.inner.node.Node, err))
	case !ok:
		return nil, ErrHeld
	}
	g.mu.Lock()
	h.depth++
	if fresh {
		g.held[key] = h
	}
	depth := h.depth
	g.mu.Unlock()
	deadline := start.Add(time.Duration(seconds) * time.Second)
	return &Lease{Key: key, Value: h.value, Start: start, Deadline: deadline, Validity: time.Until(deadline),
		Nodes: []string{g.inner.node.Node}, Depth: depth}, nil
}

// Release releases one level, as the nested section's own deferred Release does: go-zero deletes
// the key whatever the level.
func (g *goZeroNested) Release(ctx context.Context, l *Lease) error {
	g.mu.Lock()
	h := g.held[l.Key]
	if h != nil && h.value == l.Value {
		if h.depth--; h.depth <= 0 {
			delete(g.held, l.Key)
		}
	}
	g.mu.Unlock()
	if h == nil || h.value != l.Value {
		return fmt.Errorf("%w: this client holds no lease %s on %s", ErrLeaseLost, l.Value, l.Key)
	}
	ok, err := h.rl.ReleaseCtx(ctx)
	if err != nil {
		if errors.Is(err, breaker.ErrServiceUnavailable) {
			return fmt.Errorf("release on %s: %w", g.inner.node.Node, err)
		}
		return classify(fmt.Errorf("release on %s: %w", g.inner.node.Node, err))
	}
	if !ok {
		return ErrLeaseLost
	}
	return nil
}

// Warm implements Warmer: go-zero's client dials on its first command.
func (g *goZeroNested) Warm(ctx context.Context) error { return g.inner.Warm(ctx) }

func (g *goZeroNested) Close() error { return g.inner.Close() }
