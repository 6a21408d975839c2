package locks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// watchdog is the Redisson RLock algorithm, and with r2m set the R2M flavour of it (seed 004).
//
// The lock is a hash: field = this client's id and thread, value = its reentrancy count. Acquire
// is one script: take the hash when absent or ours (HINCRBY, PEXPIRE the lease time), else answer
// the remaining PTTL (R2M answers -2). A refused client subscribes to the lock's channel and waits
// for an unlock message at most the remaining TTL, then tries again, within its wait budget.
// Unlock decrements the count; at zero it deletes the hash and publishes on the channel. A
// watchdog renews every held lock every lease time / 3 while the field is there.
//
// The holder is never told that it lost the lock: the lease has no deadline, and the hold ends
// only at its release. That is the promise a watchdog lock makes; the checker judges it.
//
// Where r2m differs from watchdog: a refused acquire learns nothing of the TTL (-2); an unlock that
// leaves the count above zero does not renew the expiry; and the renewal timer stops for good at its
// first failed renewal (an error, not only a missing field), where watchdog tries again at the next
// tick after an error and stops only when the field is gone.
type watchdog struct {
	noExtend // the watchdog renews by itself; there is no renewal on request
	// nodeName names the node the client talks to now (the master, behind Sentinel).
	nodeName func() string
	client   *redis.Client
	opts     Options
	r2m      bool
	id       string // this client's id and thread, the hash field

	mu      sync.Mutex
	held    map[string]*renewal // key -> its renewal, while the count is above zero
	paused  chan struct{}       // closed when not paused; a fresh open channel while paused
	notify  func(LeaseEvent)
	crashed bool
}

// renewal is the watchdog of one held key.
type renewal struct {
	depth int
	stop  chan struct{}
}

func newWatchdog(node Endpoint, o Options, r2m bool) *watchdog {
	return newWatchdogOn(newClient(node, o), func() string { return node.Node }, o, r2m)
}

// newWatchdogSentinel is the watchdog lock on the master the sentinels name, as Redisson runs on a
// Sentinel deployment: through the same failover client (and links) as the sentinel lock.
func newWatchdogSentinel(eps []Endpoint, o Options, r2m bool) (*watchdog, error) {
	s, err := newSentinel(eps, o, false, false)
	if err != nil {
		return nil, err
	}
	return newWatchdogOn(s.client, func() string { return s.master.Load().(string) }, o, r2m), nil
}

func newWatchdogOn(client *redis.Client, nodeName func() string, o Options, r2m bool) *watchdog {
	w := &watchdog{nodeName: nodeName, client: client, opts: o, r2m: r2m, id: newValue() + ":1", held: map[string]*renewal{}, paused: make(chan struct{})}
	close(w.paused)
	return w
}

// DefaultWatchdogTimeout is Redisson's lockWatchdogTimeout; the harness passes a shorter one.
const DefaultWatchdogTimeout = 30 * time.Second

// leaseTime is how long the hash lives without a renewal: the lock's watchdog timeout. The TTL the
// caller asks for plays no part, as with Redisson's lock() without a lease time.
func (w *watchdog) leaseTime() time.Duration {
	if w.opts.WatchdogTimeout > 0 {
		return w.opts.WatchdogTimeout
	}
	return DefaultWatchdogTimeout
}

func channelOf(key string) string { return "lockpick_lock_channel:{" + key + "}" }

var (
	// Returns nil when taken (or re-entered), else the remaining PTTL (Redisson) or -2 (R2M).
	watchdogAcquire = redis.NewScript(`
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if ARGV[3] == '1' then return -2 end
return redis.call('pttl', KEYS[1])`)
	// Returns nil when the field is not ours, 0 when the count stays above zero, 1 when unlocked.
	watchdogUnlock = redis.NewScript(`
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  if ARGV[4] ~= '1' then redis.call('pexpire', KEYS[1], ARGV[2]) end
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1`)
	watchdogRenew = redis.NewScript(`
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0`)
)

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (w *watchdog) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	// Wait for an unlock at most half the TTL, so that the acquire ends well inside the harness's
	// own bound on it.
	waitUntil := start.Add(ttl / 2)
	lease := w.leaseTime()
	for {
		rctx, cancel := nodeContext(ctx, w.opts.NodeTimeout)
		res, err := watchdogAcquire.Run(rctx, w.client, []string{key}, lease.Milliseconds(), w.id, flag(w.r2m)).Result()
		cancel()
		if errors.Is(err, redis.Nil) {
			return w.granted(key, start, lease), nil
		}
		if unsent(err) {
			return nil, fmt.Errorf("%w: %s unreachable: %w", ErrNotAcquired, w.nodeName(), err)
		}
		if err != nil {
			return nil, indeterminate(fmt.Errorf("lock script on %s: %w", w.nodeName(), err))
		}
		left := time.Until(waitUntil)
		if left <= 0 {
			return nil, ErrHeld
		}
		if pttl, ok := res.(int64); ok && pttl > 0 {
			left = min(left, time.Duration(pttl)*time.Millisecond)
		}
		if err := w.waitUnlock(ctx, key, left); err != nil {
			return nil, err
		}
	}
}

// granted records a (re-)entry of key and starts its watchdog on the first.
func (w *watchdog) granted(key string, start time.Time, lease time.Duration) *Lease {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.held[key]
	if r == nil {
		r = &renewal{stop: make(chan struct{})}
		w.held[key] = r
		go w.renew(key, lease, r)
	}
	r.depth++
	return &Lease{Key: key, Value: w.id, Start: start, Nodes: []string{w.nodeName()}, Depth: r.depth}
}

// waitUnlock waits for an unlock message on key's channel, at most d.
func (w *watchdog) waitUnlock(ctx context.Context, key string, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	sub := w.client.Subscribe(wctx, channelOf(key))
	defer sub.Close()
	_, err := sub.ReceiveMessage(wctx)
	if err != nil && ctx.Err() != nil {
		return indeterminate(fmt.Errorf("waiting for an unlock of %s: %w", key, ctx.Err()))
	}
	return nil // a message, or the wait ran out: try again either way
}

// renew is the watchdog of one key: every lease/3 it renews the hash while the field is ours.
func (w *watchdog) renew(key string, lease time.Duration, r *renewal) {
	tick := time.NewTicker(lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
		w.mu.Lock()
		paused := w.paused
		w.mu.Unlock()
		select {
		case <-paused:
		case <-r.stop:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.opts.NodeTimeout)
		n, err := watchdogRenew.Run(ctx, w.client, []string{key}, lease.Milliseconds(), w.id).Int()
		cancel()
		if err != nil && w.r2m || err == nil && n == 0 {
			w.forget(key, r) // R2M stops at its first failure; both stop silently once the field is gone
			return
		}
		if err == nil {
			w.event(LeaseEvent{Key: key, Value: w.id})
		}
	}
}

func (w *watchdog) event(e LeaseEvent) {
	w.mu.Lock()
	f := w.notify
	w.mu.Unlock()
	if f != nil {
		f(e)
	}
}

// forget drops key's renewal r, if it is still the current one.
func (w *watchdog) forget(key string, r *renewal) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held[key] == r {
		delete(w.held, key)
	}
}

// Release leaves one level of the lock; the last one deletes the hash and publishes the unlock.
func (w *watchdog) Release(ctx context.Context, l *Lease) error {
	rctx, cancel := nodeContext(ctx, w.opts.NodeTimeout)
	defer cancel()
	res, err := watchdogUnlock.Run(rctx, w.client, []string{l.Key, channelOf(l.Key)}, 0, w.leaseTime().Milliseconds(), w.id, flag(w.r2m)).Result()
	if errors.Is(err, redis.Nil) {
		w.leave(l.Key, true)
		return ErrLeaseLost // Redisson: "attempt to unlock lock, not locked by current thread"
	}
	if err != nil {
		return classify(fmt.Errorf("unlock script on %s: %w", w.nodeName(), err))
	}
	w.leave(l.Key, res == int64(1))
	return nil
}

// leave lowers key's count; at zero (or when the lock is gone) its watchdog stops.
func (w *watchdog) leave(key string, gone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.held[key]
	if r == nil {
		return
	}
	r.depth--
	if gone || r.depth <= 0 {
		close(r.stop)
		delete(w.held, key)
	}
}

// Notify implements Notifier: every renewal the watchdog makes.
func (w *watchdog) Notify(f func(LeaseEvent)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notify = f
}

// Pause implements Pausable: renewals wait until Resume, as a stopped process's timers do.
func (w *watchdog) Pause() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.paused:
		w.paused = make(chan struct{})
	default:
	}
	return nil
}

// Resume implements Pausable.
func (w *watchdog) Resume() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.paused:
	default:
		close(w.paused)
	}
	return nil
}

// Crash implements Crashable: every watchdog stops for good, and nothing is released.
func (w *watchdog) Crash() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.crashed {
		return nil
	}
	w.crashed = true
	for k, r := range w.held {
		close(r.stop)
		delete(w.held, k)
	}
	return nil
}

func (w *watchdog) Warm(ctx context.Context) error {
	return warm(ctx, []*redis.Client{w.client}, w.opts.NodeTimeout)
}

// Close stops the watchdogs and closes the connection. The workload releases before it closes, so
// a watchdog still running here belongs to a lease the run ended on.
func (w *watchdog) Close() error {
	w.Crash()
	return w.client.Close()
}

// hashProbe reads watchdog locks: a lease is a hash whose fields are its holders.
func hashProbe(nodes []Node) (ProbeCloser, error) {
	p, err := newKeyProbe(nodes)
	if err != nil {
		return nil, err
	}
	p.hash = true
	return p, nil
}
