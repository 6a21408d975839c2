package nemesis

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/systems"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// TestMain silences go-redis's own log: refused dials after kills are expected.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

func TestFailoverNeedsAPrimary(t *testing.T) {
	env := netEnv(fiveNodes, []string{"c1"})
	layout, _ := systems.Layout("redis-masters", systems.Config{Nodes: 5})
	env.Roles = systems.StaticRoles(layout)
	spec, _ := ParseSpec("failover")
	if _, err := Build(spec, env); err == nil {
		t.Fatal("failover built on independent masters")
	}
	layout, _ = systems.Layout("redis-sentinel", systems.Config{})
	env.Roles = systems.StaticRoles(layout)
	for _, text := range []string{"failover", "failover:kind=kill+pause+isolate+restart:stall=0.5:down=3s:wait=1s"} {
		spec, _ := ParseSpec(text)
		if _, err := Build(spec, env); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
	}
	spec, _ = ParseSpec("pause:target=primary")
	p, err := Build(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	p.Plan(Seed(1, "pause"), time.Minute)
	op, err := p.(*Pause).Resolve(context.Background(), Op{F: "stop", Effect: history.EffectFault})
	if err != nil || !slices.Equal(op.Nodes, []string{"n1"}) {
		t.Fatalf("pause:target=primary resolved to %v, %v", op.Nodes, err)
	}
}

// The failover nemesis makes the interleaving of seed 000 happen on purpose: it stalls replication
// at a moment no lease is held, waits for a lease granted in the stall (on the primary alone), kills
// the primary, and the sentinels promote a replica that never saw the lease; a second client is
// granted the same key there while the first lease is still valid.
func TestFailoverHandsTheLockOutTwice(t *testing.T) {
	ctx := context.Background()
	sys, probe := startProbed(ctx, t, "redis-sentinel", systems.Config{Dir: t.TempDir(), Groups: []string{"c1"}}, "sentinel")
	const key, ttl = "lockpick:0", 15 * time.Second
	env := Env{Cluster: sys.Backend(), Nodes: []string{"n1", "n2", "n3"}, Links: sys.Links(), Groups: []string{"c1"},
		Roles: sys, Probe: probe, Keys: []string{key}, TTL: ttl, Interval: time.Second}
	spec, _ := ParseSpec("failover:wait=5s")
	n, err := Build(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	f := n.(*Failover)
	eps, err := sys.Endpoints("c1")
	if err != nil {
		t.Fatal(err)
	}
	a, err := locks.New("sentinel", eps, locks.Options{NodeTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := locks.New("sentinel", eps, locks.Options{NodeTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	run := func(op Op) Op { return resolveApply(ctx, t, f, op) }
	stall := run(Op{F: "stall", Effect: history.EffectFault})
	if stall.F != "stall n2/n1 n3/n1" || !slices.Equal(stall.Nodes, []string{"n1"}) {
		t.Fatalf("stall resolved to %+v", stall)
	}
	la, err := a.Acquire(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	kill := run(Op{F: "kill", Effect: history.EffectFault})
	if !slices.Equal(kill.Nodes, []string{"n1"}) {
		t.Fatalf("kill resolved to %+v", kill)
	}
	var lb *locks.Lease
	deadline := time.Now().Add(20 * time.Second)
	for lb == nil && time.Now().Before(deadline) {
		lb, err = b.Acquire(ctx, key, ttl)
		if err != nil && !errors.Is(err, locks.ErrNotAcquired) && !locks.IsIndeterminate(err) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lb == nil {
		t.Fatal("no second client got the lock after the failover")
	}
	if !time.Now().Before(la.Deadline) {
		t.Fatalf("the first lease had ended (%v) before the second was granted", la.Deadline)
	}
	// The system's role view polls the sentinels, so it may learn of the promotion after the client,
	// which asked a sentinel itself: give it a few seconds to agree.
	var primary []string
	for agree := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		primary = systems.WithRole(sys.Roles(), systems.RolePrimary)
		if slices.Equal(lb.Nodes, primary) || time.Now().After(agree) {
			break
		}
	}
	if slices.Equal(primary, []string{"n1"}) || !slices.Equal(lb.Nodes, primary) {
		t.Fatalf("second lease granted by %v, primary now %v", lb.Nodes, primary)
	}
	t.Logf("A's lease from n1 valid until %v; B's granted by %v with %v of A's left", la.Deadline.Format(time.StampMilli), lb.Nodes, time.Until(la.Deadline))
	for _, op := range []Op{{F: "start", Effect: history.EffectHeal}, {F: "unstall", Effect: history.EffectHeal}} {
		run(op)
	}
	if h := f.Healing(); len(h) != 0 {
		t.Fatalf("faults left after the heals: %v", h)
	}
}

// kind=restart brings the primary back empty before the sentinels notice: they still name it
// primary, and its replicas resync its empty data, so the lease is gone everywhere.
func TestFailoverRestartComesBackEmptyAndTrusted(t *testing.T) {
	ctx := context.Background()
	sys, probe := startProbed(ctx, t, "redis-sentinel", systems.Config{Dir: t.TempDir(), Groups: []string{"c1"}}, "sentinel")
	const key = "lockpick:0"
	env := Env{Cluster: sys.Backend(), Nodes: []string{"n1", "n2", "n3"}, Links: sys.Links(), Groups: []string{"c1"},
		Roles: sys, Probe: probe, Keys: []string{key}, TTL: 10 * time.Second, Interval: time.Second}
	spec, _ := ParseSpec("failover:kind=restart:stall=0")
	n, err := Build(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	plan := n.Plan(Seed(1, "failover"), time.Minute)
	if len(plan) < 2 || plan[0].F != "kill" || plan[1].F != "start" || plan[1].At != plan[0].At {
		t.Fatalf("plan %v", plan[:min(2, len(plan))])
	}
	eps, _ := sys.Endpoints("c1")
	a, err := locks.New("sentinel", eps, locks.Options{NodeTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Acquire(ctx, key, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(probe.Leases(ctx, []string{key})) == 0 || len(probe.Leases(ctx, []string{key})[0].Nodes) != 3 {
		if time.Now().After(deadline) {
			t.Fatal("the lease never reached the replicas")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, op := range plan[:2] {
		op, err := n.(*Failover).Resolve(ctx, op)
		if err != nil || !slices.Equal(op.Nodes, []string{"n1"}) {
			t.Fatalf("%s resolved to %v, %v", op.F, op.Nodes, err)
		}
		if err := n.Apply(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(10 * time.Second)
	for len(probe.Leases(ctx, []string{key})) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the lease survived the empty restart: %v", probe.Leases(ctx, []string{key}))
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // beyond down-after: the sentinels would have acted by now
	if p := systems.WithRole(sys.Roles(), systems.RolePrimary); !slices.Equal(p, []string{"n1"}) {
		t.Fatalf("the sentinels failed over (primary %v): the restart was not quick enough to go unnoticed", p)
	}
	// The first request may meet the connection the restart broke; a fresh one is granted.
	var lease *locks.Lease
	for try := 0; try < 3 && lease == nil; try++ {
		lease, err = a.Acquire(ctx, key, 10*time.Second)
	}
	if err != nil || !slices.Equal(lease.Nodes, []string{"n1"}) {
		t.Fatalf("the lock is not granted again on the emptied primary: %v", err)
	}
}

// kind=isolate cuts the sentinels from the primary while clients still reach it: the sentinels
// promote a replica, the old primary keeps serving until the heal, then becomes a replica.
func TestFailoverIsolateFromTheSentinels(t *testing.T) {
	ctx := context.Background()
	sys, err := systems.Start(ctx, "redis-sentinel", systems.Config{Dir: t.TempDir(), Groups: []string{"c1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	env := Env{Cluster: sys.Backend(), Nodes: []string{"n1", "n2", "n3"}, Links: sys.Links(), Groups: []string{"c1"},
		Roles: sys, TTL: 10 * time.Second, Interval: time.Second}
	spec, _ := ParseSpec("failover:kind=isolate:stall=0")
	n, err := Build(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	f := n.(*Failover)
	op, err := f.Resolve(ctx, Op{F: "isolate", Effect: history.EffectFault})
	if err != nil || op.F != "isolate s1/n1 s2/n1 s3/n1" || !slices.Equal(op.Nodes, []string{"n1"}) {
		t.Fatalf("isolate resolved to %+v, %v", op, err)
	}
	if err := f.Apply(ctx, op); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for slices.Equal(systems.WithRole(sys.Roles(), systems.RolePrimary), []string{"n1"}) {
		if time.Now().After(deadline) {
			t.Fatal("no failover while the sentinels were cut from the primary")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Through the client's link the old primary still answers, as a master.
	var c1n1 string
	eps, _ := sys.Endpoints("c1")
	for _, e := range eps {
		if e.Node == "n1" {
			c1n1 = e.Addr
		}
	}
	rc := redis.NewClient(&redis.Options{Addr: c1n1, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	defer rc.Close()
	if err := rc.Set(ctx, "written-to-the-old-primary", "x", 0).Err(); err != nil {
		t.Fatalf("the isolated primary refused a client: %v", err)
	}
	heal, err := f.Resolve(ctx, Op{F: "rejoin", Effect: history.EffectHeal})
	if err != nil || heal.F != "rejoin s1/n1 s2/n1 s3/n1" {
		t.Fatalf("rejoin resolved to %+v, %v", heal, err)
	}
	if err := f.Apply(ctx, heal); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		info, _ := rc.Info(ctx, "replication").Result()
		if strings.Contains(info, "role:slave") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the old primary was not made a replica after the heal")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startProbed starts family's system and a probe of lock on its nodes, both closed when t ends.
func startProbed(ctx context.Context, t *testing.T, family string, cfg systems.Config, lock string) (systems.System, locks.ProbeCloser) {
	t.Helper()
	sys, err := systems.Start(ctx, family, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	probe, err := locks.NewProbe(lock, sys.Nodes())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { probe.Close() })
	return sys, probe
}

// resolveApply resolves op and applies it, failing t if either step fails; the op as resolved.
func resolveApply(ctx context.Context, t *testing.T, f *Failover, op Op) Op {
	t.Helper()
	op, err := f.Resolve(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Apply(ctx, op); err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	return op
}
