package locks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zeromicro/go-zero/core/breaker"
	"github.com/zeromicro/go-zero/core/logx"
	zredis "github.com/zeromicro/go-zero/core/stores/redis"
)

// goZero is go-zero's RedisLock (core/stores/redis) on one master, through go-zero's own Redis
// client as a go-zero service gets it: a go-redis client shared by every Redis of the same address
// in the process, MaxRetries 3 (a SET NX that timed out is sent again), 3 s read timeouts that a
// context does not shorten, and a circuit breaker.
//
// The lock is one script: SET key id NX PX (seconds x 1000 + 500), or a plain SET PX when the key
// already holds this RedisLock's id. The promise is SetExpire's seconds from the send; the library
// keeps the key 500 ms longer as its tolerance. Without SetExpire the key lives 500 ms, and the
// user, told of no expiry, believes the lock held until Release: the go-zero-default lock.
type goZero struct {
	noExtend // the library has no renewal
	node     Endpoint
	store    *zredis.Redis
	opts     Options
	noTTL    bool // go-zero-default: SetExpire never called
	mu       sync.Mutex
	locks    map[string]*zredis.RedisLock // lease value -> the library's lock
}

// QuietLibraries silences go-zero's process-wide logger: it logs every failed acquire and slow call
// to stdout, and, linked in at all, prints the process's CPU use every minute from a goroutine its
// package starts, whatever lock runs. The harness's own output must stay readable; main calls this.
func QuietLibraries() {
	logx.Disable()
	logx.DisableStat()
}

func newGoZero(node Endpoint, o Options, noTTL bool) (Locker, error) {
	QuietLibraries()
	store, err := zredis.NewRedis(zredis.RedisConf{Host: node.Addr, Type: zredis.NodeType, NonBlock: true})
	if err != nil {
		return nil, fmt.Errorf("go-zero redis for %s: %w", node.Node, err)
	}
	return &goZero{node: node, store: store, opts: o, noTTL: noTTL, locks: map[string]*zredis.RedisLock{}}, nil
}

// goZeroSeconds is the whole seconds SetExpire takes for ttl.
func goZeroSeconds(ttl time.Duration) int { return int(ttl / time.Second) }

func (g *goZero) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	rl := zredis.NewRedisLock(g.store, key)
	seconds := goZeroSeconds(ttl)
	if !g.noTTL {
		if ttl < time.Second || ttl%time.Second != 0 {
			return nil, fmt.Errorf("go-zero's SetExpire takes whole seconds, not a TTL of %v", ttl)
		}
		rl.SetExpire(seconds)
	}
	start := time.Now()
	ok, err := rl.AcquireCtx(ctx)
	switch {
	case err != nil && (unsent(err) || errors.Is(err, breaker.ErrServiceUnavailable)):
		return nil, fmt.Errorf("%w: %s: %w", ErrNotAcquired, g.node.Node, err)
	case err != nil:
		return nil, indeterminate(fmt.Errorf("acquire on %s: %w", g.node.Node, err))
	case !ok:
		return nil, ErrHeld
	}
	// The library keeps its random id to itself: the lease is named by a value of the adapter's.
	value := newValue()
	g.mu.Lock()
	g.locks[value] = rl
	g.mu.Unlock()
	l := &Lease{Key: key, Value: value, Start: start, Nodes: []string{g.node.Node}}
	if !g.noTTL {
		l.Deadline = start.Add(time.Duration(seconds) * time.Second)
		l.Validity = time.Until(l.Deadline)
	}
	return l, nil
}

func (g *goZero) Release(ctx context.Context, l *Lease) error {
	g.mu.Lock()
	rl := g.locks[l.Value]
	g.mu.Unlock()
	if rl == nil {
		return fmt.Errorf("%w: this client took no lease %s on %s", ErrLeaseLost, l.Value, l.Key)
	}
	ok, err := rl.ReleaseCtx(ctx)
	if err != nil {
		if errors.Is(err, breaker.ErrServiceUnavailable) {
			return fmt.Errorf("release on %s: %w", g.node.Node, err)
		}
		return classify(fmt.Errorf("release on %s: %w", g.node.Node, err))
	}
	g.mu.Lock()
	delete(g.locks, l.Value)
	g.mu.Unlock()
	if !ok {
		return ErrLeaseLost
	}
	return nil
}

// Warm implements Warmer: go-zero's client dials on its first command.
func (g *goZero) Warm(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, g.opts.NodeTimeout)
	defer cancel()
	if !g.store.PingCtx(wctx) {
		return fmt.Errorf("ping %s failed", g.node.Node)
	}
	return nil
}

// Close has nothing to close: go-zero keeps its client per address for the life of the process.
func (g *goZero) Close() error { return nil }
