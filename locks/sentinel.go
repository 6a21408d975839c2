package locks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/systems"
)

// sentinelLock is the single-master lock on a Sentinel-managed Redis: SET NX PX on whatever master
// the sentinels name now, released by compare-and-delete there. Its promise is the single lock's,
// TTL less the drift allowance from the first request, and it holds only as long as the master
// keeps the key: a failover to a replica the key had not reached yet hands the lock out again.
//
// With wait set (sentinel-wait) an acquire that got the key then sends WAIT numreplicas timeout on
// the same connection, and when fewer replicas acknowledged, releases the key and fails, as
// Redisson does by default. With fenced (sentinel-fenced) the SET and an INCR of the key's token
// counter run in one script on the master, as the fenced lock does on its node: the tokens increase
// only while the master keeps its data, and a failover to a replica that missed the last INCRs hands
// out a token again. WAIT makes the key's loss less likely, not impossible: the
// acknowledgement is the replicas' receipt, not a promise that the one the sentinels promote has it.
type sentinelLock struct {
	client *redis.Client
	opts   Options
	wait   bool
	fenced bool
	// replicas is what WAIT asks for.
	replicas int
	// master is the data node this client last connected to: the master its connections lead to,
	// named on the leases it grants. (go-redis does not say which connection served a command; after
	// a switch it closes the connections to the old master, so they all lead to this one.)
	master atomic.Value
}

func newSentinel(eps []Endpoint, o Options, wait, fenced bool) (*sentinelLock, error) {
	var sentinels []string
	route := map[string]Endpoint{} // known address -> the node and this client's link to it
	replicas := 0
	for _, e := range eps {
		route[e.Known] = e
		switch e.Role {
		case systems.RoleSentinel:
			sentinels = append(sentinels, e.Known)
		case systems.RoleReplica:
			replicas++
		}
	}
	if len(sentinels) == 0 {
		return nil, errors.New("the sentinel lock needs the redis-sentinel system: no endpoint is a sentinel")
	}
	if o.WaitReplicas > 0 {
		replicas = o.WaitReplicas
	}
	dialer := &net.Dialer{Timeout: o.NodeTimeout}
	s := &sentinelLock{opts: o, wait: wait, fenced: fenced, replicas: replicas}
	s.master.Store("")
	master := o.MasterName
	if master == "" {
		master = systems.MasterName
	}
	s.client = redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    master,
		SentinelAddrs: sentinels,
		// The sentinels answer with the addresses the servers know each other by; every connection,
		// to a sentinel or to the master, goes through this client's own link to that node.
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			e, ok := route[addr]
			if !ok {
				return nil, fmt.Errorf("address %s is no node's: the sentinels named a server outside the system", addr)
			}
			c, err := e.DialWith(ctx, dialer, network)
			if err != nil {
				return nil, err
			}
			if e.Role != systems.RoleSentinel {
				s.master.Store(e.Node)
			}
			// go-redis compares a connection's remote address with the master's to drop the old
			// master's connections after a switch: it must see the address the sentinels use.
			return knownConn{c, addr}, nil
		},
		// A retried SET NX after a timeout has an ambiguous outcome: the lock must see the timeout.
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           o.NodeTimeout,
		ReadTimeout:           o.NodeTimeout,
		WriteTimeout:          o.NodeTimeout,
		PoolTimeout:           o.NodeTimeout,
		PoolSize:              2,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		Protocol:              2,
	})
	return s, nil
}

// knownConn is a connection through a link that reports the address the servers know its node by.
type knownConn struct {
	net.Conn
	known string
}

func (c knownConn) RemoteAddr() net.Addr {
	if a, err := net.ResolveTCPAddr("tcp", c.known); err == nil {
		return a
	}
	return c.Conn.RemoteAddr()
}

// granter names the node on a lease: the master this client's connections lead to.
func (s *sentinelLock) granter() []string {
	if n, _ := s.master.Load().(string); n != "" {
		return []string{n}
	}
	return nil
}

func (s *sentinelLock) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	value := newValue()
	start := time.Now()
	conn := s.client.Conn()
	defer conn.Close()
	token, err := s.set(ctx, conn, key, value, ttl)
	if err != nil {
		if refused(err) {
			return nil, fmt.Errorf("%w: the master refused SET NX: %v", ErrNotAcquired, err)
		}
		return nil, indeterminate(fmt.Errorf("SET NX on the master: %w", err))
	}
	if token == 0 {
		return nil, ErrHeld
	}
	lease := &Lease{Key: key, Value: value, Start: start, Nodes: s.granter()}
	if s.fenced {
		lease.Token = token
	}
	if s.wait {
		if err := s.waitReplicas(ctx, conn, ttl); err != nil {
			// The client gives the lock up, as Redisson does: it will not act on it.
			s.Release(context.WithoutCancel(ctx), lease)
			return nil, fmt.Errorf("%w: %v", ErrNotAcquired, err)
		}
	}
	now := time.Now()
	lease.Deadline = s.opts.deadline(start, ttl)
	if !lease.Deadline.After(now) {
		s.Release(context.WithoutCancel(ctx), lease)
		return nil, fmt.Errorf("%w: validity used up before the reply arrived", ErrNotAcquired)
	}
	lease.Validity = lease.Deadline.Sub(now)
	return lease, nil
}

// set sets key on the master if it is free, and returns 0 when it is taken: otherwise 1, or with
// fenced the key's next token from the same script.
func (s *sentinelLock) set(ctx context.Context, conn *redis.Conn, key, value string, ttl time.Duration) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, s.opts.NodeTimeout)
	defer cancel()
	if s.fenced {
		token, err := fencedAcquireScript.Run(rctx, conn, []string{key, TokenKey(key)}, value, ttl.Milliseconds()).Int64()
		if errors.Is(err, redis.Nil) {
			return 0, nil
		}
		return token, err
	}
	ok, err := conn.SetNX(rctx, key, value, ttl).Result()
	if err != nil || !ok {
		return 0, err
	}
	return 1, nil
}

// waitReplicas sends WAIT on the connection that set the key (WAIT counts that connection's writes)
// and fails unless enough replicas acknowledged.
func (s *sentinelLock) waitReplicas(ctx context.Context, conn *redis.Conn, ttl time.Duration) error {
	timeout := s.opts.WaitTimeout
	if timeout <= 0 {
		timeout = ttl / 10
	}
	wctx, cancel := context.WithTimeout(ctx, timeout+s.opts.NodeTimeout)
	defer cancel()
	n, err := conn.Wait(wctx, s.replicas, timeout).Result()
	if err != nil {
		return fmt.Errorf("WAIT %d %d: %w", s.replicas, timeout.Milliseconds(), err)
	}
	if int(n) < s.replicas {
		return fmt.Errorf("only %d of %d replicas acknowledged the lock within %v", n, s.replicas, timeout)
	}
	return nil
}

// refused reports whether the master answered with an error: it did not execute the command (a
// replica's READONLY, NOREPLICAS under min-replicas-to-write, LOADING), a definite failure.
func refused(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.Nil)
}

func (s *sentinelLock) Release(ctx context.Context, l *Lease) error {
	rctx, cancel := context.WithTimeout(ctx, s.opts.NodeTimeout)
	defer cancel()
	n, err := releaseScript.Run(rctx, s.client, []string{l.Key}, l.Value).Int()
	if err != nil {
		return indeterminate(fmt.Errorf("release on the master: %w", err))
	}
	if n == 0 {
		return ErrLeaseLost
	}
	return nil
}

func (s *sentinelLock) Extend(ctx context.Context, l *Lease, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, s.opts.NodeTimeout)
	defer cancel()
	n, err := extendScript.Run(rctx, s.client, []string{l.Key}, l.Value, ttl.Milliseconds()).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, indeterminate(fmt.Errorf("extend on the master: %w", err))
	}
	if n == 0 {
		return nil, ErrLeaseLost
	}
	now := time.Now()
	deadline := s.opts.deadline(start, ttl)
	if !deadline.After(now) {
		return nil, fmt.Errorf("%w: validity used up before the extension was confirmed", ErrLeaseLost)
	}
	nl := *l
	nl.Start, nl.Deadline, nl.Validity = start, deadline, deadline.Sub(now)
	return &nl, nil
}

func (s *sentinelLock) Close() error { return s.client.Close() }
