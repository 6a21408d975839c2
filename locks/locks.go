// Package locks holds the lock implementations under test, each behind the Locker interface.
package locks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/systems"
)

// Lease is what a successful acquire gives its holder.
type Lease struct {
	Key   string
	Value string
	// Token is a fencing token where the lock hands one out; zero otherwise.
	Token int64
	// Start is when the acquire sent its first request; the lock's promise counts from here.
	Start time.Time
	// Deadline is when the validity the lock promised ends. Past it the holder must stop.
	Deadline time.Time
	// Validity is Deadline minus the acquire's completion.
	Validity time.Duration
	// Nodes are the nodes that granted the lease.
	Nodes []string
	// Depth is the reentrancy count after this acquire, for reentrant locks (1 = outermost); zero
	// for locks that are not reentrant.
	Depth int
}

// Locker is one lock implementation. A Locker belongs to one process and is not shared.
type Locker interface {
	// Acquire tries to take key for ttl. It returns ErrNotAcquired when the lock certainly was not
	// granted, and an error for which IsIndeterminate is true when the outcome is unknown.
	Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error)
	// Release gives the lease back. ErrLeaseLost means the lease had already ended.
	Release(ctx context.Context, l *Lease) error
	// Extend renews the lease for ttl from now and returns the renewed lease.
	Extend(ctx context.Context, l *Lease, ttl time.Duration) (*Lease, error)
	// Close releases the Locker's connections.
	Close() error
}

// Warmer is a Locker that can open its connections ahead of its first request. A connection through
// the harness's proxies costs far more than a request on an open one, and a hundred new clients
// dialling at once on a loaded machine would see their first requests time out: the harness warms
// each new client before its first operation. Warm's errors mean nothing for the lock and are ignored.
type Warmer interface {
	Warm(ctx context.Context) error
}

// ErrNotAcquired means the lock was certainly not granted (held by someone else, or no quorum).
var ErrNotAcquired = errors.New("lock not acquired")

// ErrHeld means the lock was certainly not granted because another client holds it: the lock worked
// as designed. It wraps ErrNotAcquired. Every other definite failure (nodes unreachable, no quorum
// among the nodes that answered, validity used up) is ErrNotAcquired without ErrHeld, so that
// availability can tell contention from errors.
//
// Redlock's rule: the failure is "held" when the nodes that answered that the key is taken are on
// their own enough to deny a quorum (more than N - quorum of them), whatever the other nodes did.
// A client cut off from a majority whose few reachable nodes are taken is refused for being cut
// off, not for contention, and gets a plain ErrNotAcquired.
var ErrHeld = fmt.Errorf("%w: held by another client", ErrNotAcquired)

// IsHeld reports whether err is a definite failure because another client holds the lock.
func IsHeld(err error) bool { return errors.Is(err, ErrHeld) }

// ErrLeaseLost means the lease was no longer held when it was released or extended.
var ErrLeaseLost = errors.New("lease no longer held")

// IndeterminateError wraps a failure whose effect on the lock is unknown: a timeout or a broken
// connection after the request may have been applied.
type IndeterminateError struct{ Err error }

func (e *IndeterminateError) Error() string { return "indeterminate: " + e.Err.Error() }
func (e *IndeterminateError) Unwrap() error { return e.Err }

// IsIndeterminate reports whether err leaves the outcome unknown.
// errors.AsType, not errors.As: it runs on every refused acquire, and As's reflection cost 1% of
// the harness's CPU at the ceiling.
func IsIndeterminate(err error) bool {
	_, ok := errors.AsType[*IndeterminateError](err)
	return ok
}

func indeterminate(err error) error { return &IndeterminateError{Err: err} }

// unsent reports whether a request certainly never left the client: its connection could not be
// dialled, or no connection was free. Such a failure has no effect on the lock, so it is definite.
// Any other error after a request may have been written (a timeout, a reset, a closed connection)
// leaves the outcome unknown.
func unsent(err error) bool {
	if err == nil {
		return false // every acquire asks: no allocation for the common case
	}
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" {
		return true
	}
	return errors.Is(err, redis.ErrPoolTimeout)
}

// classify turns a failed request to one node into a definite error (unsent) or an indeterminate one.
func classify(err error) error {
	if unsent(err) {
		return err
	}
	return indeterminate(err)
}

// Endpoint is how a Locker reaches one node: through the node's link for the Locker's client group.
type Endpoint = systems.Endpoint

// Node is one node of a system, as a probe sees it.
type Node = systems.Node

// Options tune a lock. Zero values take the defaults documented on each field.
type Options struct {
	// NodeTimeout bounds each request to one node; the harness passes its own default (TTL/4 within
	// [50ms, 2s]); a Locker built without one uses 100ms.
	NodeTimeout time.Duration
	// DriftFactor is the share of the TTL reserved for clock drift; default 0.01 (the Redlock spec).
	DriftFactor float64
	// DriftConst is added to the drift allowance; default 2ms (the Redlock spec).
	DriftConst time.Duration
	// Tries is how many rounds a Redlock acquire makes before giving up; default 1.
	Tries int
	// RetryDelay is the upper bound of the random pause between Redlock rounds; default 50ms.
	RetryDelay time.Duration
	// WaitReplicas is how many replicas sentinel-wait's WAIT asks to acknowledge the lock key;
	// default every replica of the system, as Redisson waits for every available replica.
	WaitReplicas int
	// WaitTimeout bounds sentinel-wait's WAIT; default the TTL of the acquire divided by 10.
	WaitTimeout time.Duration
	// WatchdogTimeout is a watchdog lock's lease time, renewed every third of it while held;
	// default 30s (Redisson's).
	WatchdogTimeout time.Duration
	// Clock is the client's wall clock, for locks that trust it (seed 002's SETNX/GETSET stores
	// client timestamps); nil means time.Now. The client-clock nemesis moves it per process.
	Clock func() time.Time
	// Crash is called by a lock at its crash points (see CrashPoint); nil means never crash.
	Crash func(point CrashPoint) error

	// The fields below are for client programs (the client protocol, locks/external.go).

	// Process is the process id the Locker serves; a client program gets it in init.
	Process int
	// TTL is the run's lease TTL, sent in init.
	TTL time.Duration
	// KeyPrefix is the prefix of every key the workload asks for, sent in init.
	KeyPrefix string
	// ClientDir is where client programs keep their logs (pN.log) and clock files.
	ClientDir string
	// ClientCmd is the program and arguments of --lock client.
	ClientCmd []string
	// ClientCaps are the capabilities the user declared for --lock client; the program's init_ok
	// must offer each of them.
	ClientCaps []string
	// ClientOptions are passed to the program in init as they are.
	ClientOptions map[string]string
	// ClockShim is the clock shim loaded into client programs (LD_PRELOAD); empty loads none.
	ClockShim string
	// ClientInitTimeout bounds a program's answer to init; zero means ClientInitTimeout.
	ClientInitTimeout time.Duration
	// MasterName is the name the sentinels monitor the primary under; empty means systems.MasterName,
	// the one lockpick's own sentinels use.
	MasterName string
}

// now reads the client's wall clock.
func (o Options) now() time.Time {
	if o.Clock != nil {
		return o.Clock()
	}
	return time.Now()
}

// crashAt reports whether the client dies at point.
func (o Options) crashAt(point CrashPoint) error {
	if o.Crash != nil {
		return o.Crash(point)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = 100 * time.Millisecond
	}
	if o.DriftFactor == 0 {
		o.DriftFactor = 0.01
	}
	if o.DriftConst == 0 {
		o.DriftConst = 2 * time.Millisecond
	}
	if o.Tries <= 0 {
		o.Tries = 1
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = 50 * time.Millisecond
	}
	return o
}

// deadline is the end of the validity a lease of ttl promises when its first request was sent at
// start: the TTL less the drift allowance between clocks, as the Redlock spec computes it.
func (o Options) deadline(start time.Time, ttl time.Duration) time.Time {
	drift := time.Duration(float64(ttl)*o.DriftFactor) + o.DriftConst
	return start.Add(ttl - drift)
}

// GivesTokens reports whether the named lock hands out fencing tokens.
func GivesTokens(name string) bool {
	k, err := Lookup(name)
	return err == nil && k.Tokens
}

// New builds the named lock over the given nodes.
func New(name string, nodes []Endpoint, opts Options) (Locker, error) {
	k, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("lock %s needs at least one node", name)
	}
	return k.Build(nodes, opts.withDefaults())
}

// Build builds a lock of kind k over the given nodes (New, for a kind already looked up).
func Build(k Kind, nodes []Endpoint, opts Options) (Locker, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("lock %s needs at least one node", k.Name)
	}
	return k.Build(nodes, opts.withDefaults())
}

// Validate checks a lock name without building it.
func Validate(name string) error {
	_, err := Lookup(name)
	return err
}

// newClient opens a go-redis client for one node. MaxRetries is -1: a retried SET NX after a
// timeout has an ambiguous outcome, so the lock must see the timeout, not a silent retry.
func newClient(e Endpoint, o Options) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:         e.Addr,
		Dialer:       e.Dial, // nil: go-redis dials Addr
		MaxRetries:   -1,
		DialTimeout:  o.NodeTimeout,
		ReadTimeout:  o.NodeTimeout,
		WriteTimeout: o.NodeTimeout,
		PoolTimeout:  o.NodeTimeout,
		PoolSize:     2,
		// One dial attempt: a dead node must fail fast, not after a backoff loop the lock cannot see.
		DialerRetries:         1,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		Protocol:              2,
	})
}

// warm pings each client once, in parallel, each bounded by the node timeout.
func warm(ctx context.Context, clients []*redis.Client, timeout time.Duration) error {
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			errs[i] = c.Ping(wctx).Err()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// valueAlphabet is RFC 4648's base32 alphabet, the one crypto/rand.Text writes.
const valueAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// newValue returns a random lease value, unique across all clients: 26 characters of
// valueAlphabet, 130 random bits, the form crypto/rand.Text gives. A lease value must be unique,
// not secret, so it comes from math/rand/v2's generator (the runtime's ChaCha8, seeded by the
// operating system, never by a run's seed): crypto/rand cost a system call per value, 1.5% of the
// harness's CPU at the ceiling.
func newValue() string {
	var b [26]byte
	var bits uint64
	for i := range b {
		if i%12 == 0 { // 12 characters of 5 bits from each 64-bit draw
			bits = rand.Uint64()
		}
		b[i] = valueAlphabet[bits&31]
		bits >>= 5
	}
	return string(b[:])
}

// Scripts shared by the Redis locks: compare-and-delete and compare-and-pexpire, so a client never
// touches a lease it no longer owns.
var (
	releaseScript = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)
	extendScript  = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end`)
)
