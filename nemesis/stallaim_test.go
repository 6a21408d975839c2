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
	sys, probe := startProbed(ctx, t, "redis-sentinel", systems.Config{Dir: t.TempDir(), Groups: []string{"c1"}}, "sentinel")
	const key = "lockpick:0"
	addr := map[string]string{}
	for _, n := range sys.Nodes() {
		addr[n.Name] = n.Addr
	}
	env := Env{Cluster: sys.Backend(), Nodes: []string{"n1", "n2", "n3"}, Links: sys.Links(), Groups: []string{"c1"},
		Roles: sys, Probe: probe, Writes: sys, Keys: []string{key}, TTL: 10 * time.Second, Interval: time.Second}
	spec, _ := ParseSpec("failover:wait=5s")
	n, err := Build(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	f := n.(*Failover)
	replicas := map[string]func() bool{}
	for _, r := range []string{"n2", "n3"} {
		c := systems.AdminClient(addr[r])
		defer c.Close()
		replicas[r] = func() bool { return c.Exists(ctx, key).Val() > 0 }
	}
	grants, stop := hammer(t, addr["n1"], key)
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
