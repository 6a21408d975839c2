package nemesis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/systems"
)

// hammer sets key NX on addr and deletes it again, as fast as it can, until stop is called: the key
// is present about half the time and never for long, a hot key whose gaps a look sees easily but a
// stall a round trip later misses. It returns how many grants it made so far.
func hammer(t *testing.T, addr, key string) (grants func() int64, stop func()) {
	t.Helper()
	c := systems.AdminClient(addr)
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			ok, err := c.SetNX(ctx, key, fmt.Sprint("h", i), 10*time.Second).Result()
			if err == nil && ok {
				n.Add(1)
				c.Del(ctx, key)
			}
		}
	})
	return n.Load, func() { cancel(); wg.Wait(); c.Close() }
}

// A stall aimed while a client hammers a hot key lands at a moment no node holds it: the look at the
// leases and the stall are made with the primary's client writes held, so no grant comes between
// them, and no replica is left with a copy of a lease whose release the stall keeps from it (which
// would outlive a failover on the promoted replica). A stall made a round trip after a look that saw
// the gap (as before write holds) leaves such a copy in about half the tries. The hold ends with the
// stall: the hammer goes on at once, and the stall's events say the writes were held.
func TestFailoverStallLandsWithNoLease(t *testing.T) {
	ctx := context.Background()
	const key = "lockpick:0"
	f, primary, replicas := stallFixture(ctx, t, key, nil, "failover:wait=5s")
	grants, stop := hammer(t, primary, key)
	defer stop()
	const tries = 8
	for i := range tries {
		stall := Op{F: "stall", Effect: history.EffectFault}
		stall, err := f.Resolve(ctx, stall)
		if err != nil {
			t.Fatal(err)
		}
		inv := history.Event{Type: history.Invoke}
		f.Annotate(ctx, stall, &inv, nil)
		if err := f.Apply(ctx, stall); err != nil {
			t.Fatal(err)
		}
		done := history.Event{Type: history.Info}
		f.Annotate(ctx, stall, &done, nil)
		if !strings.Contains(inv.Note, "client writes on n1 held") || !strings.Contains(done.Note, "writes held ") {
			t.Fatalf("try %d: the stall's events do not say the writes were held: invoke %q, completion %q", i, inv.Note, done.Note)
		}
		// The hold ended with the stall: the hammer grants again at once, on the primary alone.
		before := grants()
		for wait := time.Now().Add(time.Second); grants() < before+10; time.Sleep(time.Millisecond) {
			if time.Now().After(wait) {
				t.Fatalf("try %d: the primary's writes are still held after the stall (%d grants)", i, grants()-before)
			}
		}
		time.Sleep(50 * time.Millisecond)
		for r, has := range replicas {
			if has() {
				t.Errorf("try %d: replica %s kept a copy of the key through the stall (%s)", i, r, done.Note)
			}
		}
		resolveApply(ctx, t, f, Op{F: "unstall", Effect: history.EffectHeal})
		time.Sleep(50 * time.Millisecond)
	}
	if h := f.Healing(); len(h) != 0 {
		t.Fatalf("faults left after the heals: %v", h)
	}
}

// Where the system cannot hold writes (postgres), a stall is aimed as before: at a read that saw no
// lease on the primary, with no note; with no such read within Wait it goes ahead and says so.
func TestFailoverStallWithoutHolds(t *testing.T) {
	ctx := context.Background()
	probe := &fixedProbe{}
	env := Env{Nodes: []string{"n1", "n2"}, Roles: staticRoles{"n1": systems.RolePrimary, "n2": systems.RoleReplica},
		Probe: probe, Writes: refusingHolder{}, Keys: []string{"k"}, TTL: time.Second, Interval: time.Second}
	env.Log = slog.New(slog.DiscardHandler)
	f := &Failover{Env: env, Wait: 100 * time.Millisecond}
	h, note := f.aimStall(ctx, "n1")
	if h != nil || note != "" {
		t.Fatalf("no lease, writes not held: hold %v, note %q", h, note)
	}
	probe.leases = []systems.Lease{{Key: "k", Value: "v", Nodes: []string{"n1", "n2"}}}
	began := time.Now()
	h, note = f.aimStall(ctx, "n1")
	if h != nil || !strings.Contains(note, "stalled with one present") || time.Since(began) < f.Wait {
		t.Fatalf("a lease present throughout: hold %v, note %q after %v", h, note, time.Since(began))
	}
}

type fixedProbe struct{ leases []systems.Lease }

func (p *fixedProbe) Leases(context.Context, []string) []systems.Lease { return p.leases }

type refusingHolder struct{}

func (refusingHolder) HoldWrites(context.Context, string, time.Duration, func(context.Context) error) error {
	return fmt.Errorf("cannot hold writes back")
}

type staticRoles map[string]systems.Role

func (r staticRoles) Roles() map[string]systems.Role { return r }

// releaseView is the history's view of who holds the lock, kept by the test's clients: a hold ends
// when its release is invoked, as the harness counts it, and its watcher is called then, before the
// client sends the release.
type releaseView struct {
	n       atomic.Int64
	mu      sync.Mutex
	watcher func()
}

func (v *releaseView) Holders() []Holder { return make([]Holder, v.n.Load()) }

func (v *releaseView) OnRelease(f func()) func() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.watcher = f
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.watcher = nil
	}
}

func (v *releaseView) released() {
	v.n.Add(-1)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.watcher != nil {
		v.watcher()
	}
}

// contend runs clients on key at addr as the watchdog locks do: a client refused waits for the
// holder's unlock message and tries again at once, so the key is free for well under a millisecond
// between a release and the next grant; each hold lasts hold. view follows the holds.
func contend(t *testing.T, addr, key string, clients int, hold time.Duration, view *releaseView) (grants func() int64, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	var wg sync.WaitGroup
	unlock := redis.NewScript(`redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], 'unlocked'); return 1`)
	for c := range clients {
		cl := systems.AdminClient(addr)
		sub := cl.Subscribe(ctx, key+":channel")
		wg.Go(func() {
			defer cl.Close()
			defer sub.Close()
			for i := 0; ctx.Err() == nil; i++ {
				ok, err := cl.SetNX(ctx, key, fmt.Sprintf("c%d-%d", c, i), 10*time.Second).Result()
				if err != nil || !ok {
					wctx, wcancel := context.WithTimeout(ctx, 100*time.Millisecond)
					sub.ReceiveMessage(wctx)
					wcancel()
					continue
				}
				n.Add(1)
				view.n.Add(1)
				sleepCtx(ctx, hold)
				view.released() // the release is invoked
				unlock.Run(context.WithoutCancel(ctx), cl, []string{key, key + ":channel"})
			}
		})
	}
	return n.Load, func() { cancel(); wg.Wait() }
}

// Where refused clients wait for the unlock message (the watchdog locks), the key is free for less
// than the round trip a look and a stall take: reads do not see that moment. The aim takes the hold
// when the history shows a release invoked, and steps it until the release has run: the next grant,
// a round trip behind, is held back, and the stall lands with no lease on any node.
func TestFailoverStallCatchesTheGapAfterARelease(t *testing.T) {
	ctx := context.Background()
	const key = "lockpick:0"
	view := &releaseView{}
	f, primary, replicas := stallFixture(ctx, t, key, view, "failover:wait=3s")
	grants, stop := contend(t, primary, key, 4, 20*time.Millisecond, view)
	defer stop()
	for wait := time.Now().Add(5 * time.Second); grants() < 10; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("the clients made %d grants in 5s", grants())
		}
	}
	const tries = 5
	for i := range tries {
		began := time.Now()
		stall, err := f.Resolve(ctx, Op{F: "stall", Effect: history.EffectFault})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Apply(ctx, stall); err != nil {
			t.Fatal(err)
		}
		done := history.Event{Type: history.Info}
		f.Annotate(ctx, stall, &done, nil)
		if !strings.Contains(done.Note, "client writes on n1 held") {
			t.Fatalf("try %d: the stall was not aimed at a moment without a lease: %q", i, done.Note)
		}
		t.Logf("try %d: aimed in %v: %s", i, time.Since(began).Round(time.Millisecond), done.Note)
		time.Sleep(50 * time.Millisecond)
		for r, has := range replicas {
			if has() {
				t.Errorf("try %d: replica %s kept a copy of the key through the stall", i, r)
			}
		}
		resolveApply(ctx, t, f, Op{F: "unstall", Effect: history.EffectHeal})
		time.Sleep(50 * time.Millisecond)
	}
}

// stallFixture starts a Sentinel deployment (n1 the primary, n2 and n3 its replicas) and builds the
// failover nemesis of spec on it, its probe on key and holders (nil for none); it returns the
// nemesis, the primary's address, and a test per replica of whether it has key.
func stallFixture(ctx context.Context, t *testing.T, key string, holders HolderView, spec string) (*Failover, string, map[string]func() bool) {
	t.Helper()
	sys, probe := startProbed(ctx, t, "redis-sentinel", systems.Config{Dir: t.TempDir(), Groups: []string{"c1"}}, "sentinel")
	addr := map[string]string{}
	for _, n := range sys.Nodes() {
		addr[n.Name] = n.Addr
	}
	env := Env{Cluster: sys.Backend(), Nodes: []string{"n1", "n2", "n3"}, Links: sys.Links(), Groups: []string{"c1"},
		Roles: sys, Probe: probe, Writes: sys, Holders: holders, Keys: []string{key}, TTL: 10 * time.Second, Interval: time.Second}
	parsed, _ := ParseSpec(spec)
	n, err := Build(parsed, env)
	if err != nil {
		t.Fatal(err)
	}
	replicas := map[string]func() bool{}
	for _, r := range []string{"n2", "n3"} {
		c := systems.AdminClient(addr[r])
		t.Cleanup(func() { c.Close() })
		replicas[r] = func() bool { return c.Exists(ctx, key).Val() > 0 }
	}
	return n.(*Failover), addr["n1"], replicas
}
