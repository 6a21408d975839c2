package locks

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// rueidisLock is rueidis's rueidislock on one master, with KeyMajority 1 (one key, as its README
// advises for a single Redis) and NoLoopTracking (Redis >= 7.0.5). Acquire is TryWithContext: SET NX
// PXAT <the client's wall clock + KeyValidity> in a script that also reads the key, so that client-side
// caching tells the locker when the key changes. The lock is the returned context: the library keeps
// it alive by PEXPIREAT every KeyValidity/2 and cancels it, "immediately" says its README, once the key
// is no longer held. So the lease has no deadline (Open): it lasts until the release, or until the
// library cancels the context, which the adapter reports as a lost event; each extension the locker
// makes by itself is a renewed event.
//
// KeyValidity is the run's watchdog timeout (default the TTL); TryNextAfter, the bound of each SET,
// is the harness's node timeout.
type rueidisLock struct {
	noExtend // the locker renews by itself; there is no renewal on request
	node     Endpoint
	opts     Options
	client   *rueidisClient

	mu      sync.Mutex
	locker  rueidislock.Locker // built at the first request: rueidis dials when it is built
	held    map[string]*rueidisLease
	notify  func(LeaseEvent)
	crashed atomic.Bool
}

// rueidisLease is one lease: the context the library handed out and how to end it.
type rueidisLease struct {
	key, value string
	ctx        context.Context
	cancel     context.CancelFunc
	released   atomic.Bool
}

// rueidisKeyPrefix is rueidislock's default KeyPrefix; with KeyMajority 1 its one key is
// "<prefix>:0:<name>".
const rueidisKeyPrefix = "rueidislock"

func rueidisKey(name string) string { return rueidisKeyPrefix + ":0:" + name }

func newRueidis(nodes []Endpoint, o Options) (Locker, error) {
	r := &rueidisLock{node: nodes[0], opts: o, held: map[string]*rueidisLease{}}
	r.client = newRueidisClient(o, r.renewed)
	return r, nil
}

// open builds the library's locker once. rueidis dials when a client is built, so a node that is
// down makes the acquire fail, not the client's construction.
func (r *rueidisLock) open() (rueidislock.Locker, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.locker != nil {
		return r.locker, nil
	}
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{
			InitAddress: []string{r.node.Addr},
			Dialer:      net.Dialer{Timeout: r.opts.NodeTimeout},
		},
		ClientBuilder:  r.client.build,
		KeyValidity:    r.opts.WatchdogTimeout,
		TryNextAfter:   r.opts.NodeTimeout,
		KeyMajority:    1,
		NoLoopTracking: true,
	})
	if err != nil {
		return nil, err
	}
	r.locker = l
	return l, nil
}

func (r *rueidisLock) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	locker, err := r.open()
	if err != nil {
		return nil, fmt.Errorf("%w: %s unreachable: %w", ErrNotAcquired, r.node.Node, err)
	}
	// The lock's context must not end with the request's: it is the lease.
	lctx, cancel, err := locker.TryWithContext(context.WithoutCancel(ctx), key)
	switch {
	case errors.Is(err, rueidislock.ErrNotLocked):
		return nil, fmt.Errorf("%w: %w", ErrHeld, err)
	case errors.Is(err, rueidislock.ErrLockerClosed) || err != nil && unsent(err):
		return nil, fmt.Errorf("%w: %s: %w", ErrNotAcquired, r.node.Node, err)
	case err != nil:
		return nil, indeterminate(fmt.Errorf("acquire on %s: %w", r.node.Node, err))
	}
	l := &rueidisLease{key: key, value: hex.EncodeToString([]byte(r.client.value(rueidisKey(key)))), ctx: lctx, cancel: cancel}
	r.mu.Lock()
	r.held[l.value] = l
	r.mu.Unlock()
	go r.watch(l)
	return &Lease{Key: key, Value: l.value, Start: start, Nodes: []string{r.node.Node}}, nil
}

// watch reports the library's cancellation of a lease it was not asked to end.
func (r *rueidisLock) watch(l *rueidisLease) {
	<-l.ctx.Done()
	if l.released.Load() || r.crashed.Load() {
		return
	}
	r.event(LeaseEvent{Key: l.key, Value: l.value, Lost: true})
}

// renewed is called by the client for an extension the locker made by itself.
func (r *rueidisLock) renewed(libKey, value string) {
	v := hex.EncodeToString([]byte(value))
	r.mu.Lock()
	l := r.held[v]
	r.mu.Unlock()
	if l != nil && l.ctx.Err() == nil && !r.crashed.Load() {
		r.event(LeaseEvent{Key: l.key, Value: v})
	}
}

func (r *rueidisLock) event(e LeaseEvent) {
	r.mu.Lock()
	f := r.notify
	r.mu.Unlock()
	if f != nil {
		f(e)
	}
}

// Release cancels the lease's context, as the library's README says to: the locker deletes the key
// where it is still ours. The library reports nothing of that delete; a lease whose context it had
// already cancelled was lost before the release.
func (r *rueidisLock) Release(_ context.Context, l *Lease) error {
	r.mu.Lock()
	rl := r.held[l.Value]
	delete(r.held, l.Value)
	r.mu.Unlock()
	if rl == nil {
		return fmt.Errorf("%w: this client holds no lease %s on %s", ErrLeaseLost, l.Value, l.Key)
	}
	lost := rl.ctx.Err() != nil
	rl.released.Store(true)
	rl.cancel()
	if lost {
		return fmt.Errorf("%w: the locker had cancelled the lease's context", ErrLeaseLost)
	}
	return nil
}

// Notify implements Notifier: the locker's own extensions, and its cancellations.
func (r *rueidisLock) Notify(f func(LeaseEvent)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notify = f
}

// Pause implements Pausable: nothing the client sends leaves it until Resume.
func (r *rueidisLock) Pause() error { r.client.gate.pause(); return nil }

// Resume implements Pausable.
func (r *rueidisLock) Resume() error { r.client.gate.resume(); return nil }

// Crash implements Crashable: nothing leaves the client any more, so the locker's extensions and
// deletes fail, and the cancellations that follow are not reported.
func (r *rueidisLock) Crash() error {
	r.crashed.Store(true)
	r.client.kill()
	return nil
}

// Warm implements Warmer: it builds the locker, which dials.
func (r *rueidisLock) Warm(context.Context) error {
	_, err := r.open()
	return err
}

func (r *rueidisLock) Close() error {
	r.Crash()
	r.mu.Lock()
	l := r.locker
	r.locker = nil
	r.mu.Unlock()
	if l != nil {
		l.Close()
	}
	return nil
}

// rueidisProbe reads rueidislock's keys: "rueidislock:0:<key>", values hex-encoded as the leases'.
func rueidisProbe(nodes []Node) (ProbeCloser, error) {
	p, err := newKeyProbe(nodes)
	if err != nil {
		return nil, err
	}
	p.keyName, p.hexValues = rueidisKey, true
	return p, nil
}
