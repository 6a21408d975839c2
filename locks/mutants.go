package locks

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Mutants are deliberately broken variants of the built-in locks, for lockpick's self-test: each
// carries one realistic defect of the kind found in lock libraries, and the self-test checks that
// some scenario catches it. They are built by New under the name MutantPrefix+name but are not in
// Names, so no help text, completion or matrix offers them.
const MutantPrefix = "mutant-"

// Mutant describes one broken lock.
type Mutant struct {
	// Name is the mutant's name without MutantPrefix; Base the lock it breaks (single or redlock).
	Name, Base string
	// Defect says what is wrong, in one line.
	Defect string
	build  func(nodes []Endpoint, o Options) Locker
}

// Mutants lists the broken locks the self-test runs.
func Mutants() []Mutant {
	return []Mutant{
		{"redlock-quorum-off-by-one", "redlock", "quorum N/2 instead of N/2+1: two clients can each win half", func(n []Endpoint, o Options) Locker {
			r := newRedlock(n, o)
			r.quorum = len(n) / 2
			return r
		}},
		{"redlock-validity-from-reply", "redlock", "validity counted from the reply instead of the first request: the time the acquire took is not subtracted", func(n []Endpoint, o Options) Locker {
			return &fromReply{newRedlock(n, o)}
		}},
		{"redlock-release-del", "redlock", "release by plain DEL on every node, without checking the value", func(n []Endpoint, o Options) Locker {
			r := newRedlock(n, o)
			return &plainDel{Locker: r, clients: r.clients}
		}},
		{"single-seconds", "single", "lease sent as whole seconds (SET EX int(ttl.Seconds())) while the validity is computed from the exact TTL", func(n []Endpoint, o Options) Locker {
			return &seconds{newSingle(n[0], o)}
		}},
		{"single-release-del", "single", "release by plain DEL, without checking the value", func(n []Endpoint, o Options) Locker {
			s := newSingle(n[0], o)
			return &plainDel{Locker: s, clients: []*redis.Client{s.client}}
		}},
		{"single-release-get-del", "single", "release by GET, compare, then DEL: two round trips, so the key can change hands between them", func(n []Endpoint, o Options) Locker {
			return &getDel{newSingle(n[0], o)}
		}},
		{"single-extend-unchecked", "single", "extend by plain PEXPIRE: no check that the lease is still the holder's, nor that it is still valid", func(n []Endpoint, o Options) Locker {
			return &blindExtend{newSingle(n[0], o)}
		}},
		{"redlock-no-drift", "redlock", "no drift allowance: the validity is the whole TTL less the acquire's time, so a node clock running slightly fast expires the key before the promise ends", func(n []Endpoint, o Options) Locker {
			return newRedlock(n, noDrift(o))
		}},
		{wallClockMutant, "single", "the deadline is computed from the client's wall clock (no monotonic reading): a clock running ahead at acquire time promises a lease that ends later than the key", func(n []Endpoint, o Options) Locker {
			return &wallClock{newSingle(n[0], o)}
		}},
		{"single-timeout-grants", "single", "a SET NX that timed out counts as granted", func(n []Endpoint, o Options) Locker {
			return &timeoutGrants{newSingle(n[0], o)}
		}},
	}
}

// wallClockMutant is the one mutant that reads the client's wall clock (Options.Clock).
const wallClockMutant = "single-wall-clock"

// readsWallClock reports whether the mutant's client reads Options.Clock (Kind.WallClock).
func (m Mutant) readsWallClock() bool { return m.Name == wallClockMutant }

// wallClock computes the lease's deadline from the client's wall clock, as a library that keeps
// deadlines in Unix milliseconds does: the deadline carries no monotonic reading, so the client's
// clock offset at acquire time moves it.
type wallClock struct{ *single }

func (w *wallClock) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	wallStart := w.opts.now().Round(0)
	l, err := w.single.Acquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	l.Deadline = w.opts.deadline(wallStart, ttl)
	l.Validity = l.Deadline.Sub(w.opts.now().Round(0))
	return l, nil
}

// noDrift removes the drift allowance (zero would mean the default, so the smallest non-zero values).
func noDrift(o Options) Options {
	o.DriftFactor, o.DriftConst = 1e-12, 1
	return o
}

// mutant finds a mutant by its full name (with MutantPrefix).
func mutant(name string) (Mutant, bool) {
	for _, m := range Mutants() {
		if MutantPrefix+m.Name == name {
			return m, true
		}
	}
	return Mutant{}, false
}

// Base is the built-in lock a name stands for: the name itself, or the lock a mutant breaks.
func Base(name string) string {
	if m, ok := mutant(name); ok {
		return m.Base
	}
	return name
}

// fromReply counts the validity from the acquire's reply, as if the acquire took no time.
type fromReply struct{ *redlock }

func (f *fromReply) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	l, err := f.redlock.Acquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	took := time.Since(l.Start)
	l.Deadline, l.Validity = l.Deadline.Add(took), l.Validity+took
	return l, nil
}

// plainDel releases by DEL on every client, whoever holds the key now.
type plainDel struct {
	Locker
	clients []*redis.Client
}

func (p *plainDel) Release(ctx context.Context, l *Lease) error {
	var deleted int64
	for _, c := range p.clients {
		rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		n, err := c.Del(rctx, l.Key).Result()
		cancel()
		if err != nil {
			return classify(fmt.Errorf("release: %w", err))
		}
		deleted += n
	}
	if deleted == 0 {
		return ErrLeaseLost
	}
	return nil
}

// seconds sends the TTL in whole seconds.
type seconds struct{ *single }

func (s *seconds) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	value := newValue()
	start := time.Now()
	rctx, cancel := nodeContext(ctx, s.opts.NodeTimeout)
	ok, err := s.client.SetNX(rctx, key, value, time.Duration(int(ttl.Seconds()))*time.Second).Result()
	cancel()
	return s.lease(key, value, start, ttl, ok, err)
}

// lease turns a SET NX reply into a lease, as single's Acquire does.
func (s *single) lease(key, value string, start time.Time, ttl time.Duration, ok bool, err error) (*Lease, error) {
	if unsent(err) {
		return nil, fmt.Errorf("%w: %s unreachable: %w", ErrNotAcquired, s.node.Node, err)
	}
	if err != nil {
		return nil, indeterminate(fmt.Errorf("SET NX on %s: %w", s.node.Node, err))
	}
	if !ok {
		return nil, ErrHeld
	}
	now := time.Now()
	deadline := s.opts.deadline(start, ttl)
	if !deadline.After(now) {
		return nil, fmt.Errorf("%w: validity used up before the reply arrived", ErrNotAcquired)
	}
	return &Lease{Key: key, Value: value, Start: start, Deadline: deadline, Validity: deadline.Sub(now), Nodes: []string{s.node.Node}}, nil
}

// getDel releases in two round trips.
type getDel struct{ *single }

func (g *getDel) Release(ctx context.Context, l *Lease) error {
	rctx, cancel := context.WithTimeout(ctx, 2*g.opts.NodeTimeout)
	defer cancel()
	v, err := g.client.Get(rctx, l.Key).Result()
	if err == redis.Nil || (err == nil && v != l.Value) {
		return ErrLeaseLost
	}
	if err != nil {
		return classify(fmt.Errorf("release GET: %w", err))
	}
	if err := g.client.Del(rctx, l.Key).Err(); err != nil {
		return indeterminate(fmt.Errorf("release DEL: %w", err))
	}
	return nil
}

// blindExtend renews whatever the key holds, whenever asked.
type blindExtend struct{ *single }

func (b *blindExtend) Extend(ctx context.Context, l *Lease, ttl time.Duration) (*Lease, error) {
	start := time.Now()
	rctx, cancel := nodeContext(ctx, b.opts.NodeTimeout)
	defer cancel()
	ok, err := b.client.PExpire(rctx, l.Key, ttl).Result()
	if err != nil {
		return nil, classify(fmt.Errorf("extend: %w", err))
	}
	if !ok {
		return nil, ErrLeaseLost
	}
	nl := *l
	nl.Start, nl.Deadline = start, b.opts.deadline(start, ttl)
	nl.Validity = time.Until(nl.Deadline)
	return &nl, nil
}

// timeoutGrants takes a timed-out SET NX for a grant.
type timeoutGrants struct{ *single }

func (t *timeoutGrants) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	value := newValue()
	start := time.Now()
	rctx, cancel := nodeContext(ctx, t.opts.NodeTimeout)
	ok, err := t.client.SetNX(rctx, key, value, ttl).Result()
	cancel()
	if err != nil && !unsent(err) {
		ok, err = true, nil
	}
	return t.lease(key, value, start, ttl, ok, err)
}
