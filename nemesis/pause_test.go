package nemesis

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/links"
	"github.com/lockpick-dev/lockpick/systems"
)

func TestPausePlans(t *testing.T) {
	env := netEnv(fiveNodes, []string{"c1"})
	env.Interval = time.Second
	limit := 5 * time.Minute
	for text, want := range map[string][]time.Duration{
		"pause":                   {time.Second, 2 * time.Second, 4 * time.Second},
		"pause:duration=below":    {time.Second},
		"pause:duration=around":   {2 * time.Second},
		"pause:duration=above":    {4 * time.Second},
		"pause:duration=1500ms":   {1500 * time.Millisecond},
		"pause:target=majority":   {time.Second, 2 * time.Second, 4 * time.Second},
		"pause:target=holder-one": {time.Second, 2 * time.Second, 4 * time.Second},
	} {
		n := build(t, text, env)
		plan := n.Plan(Seed(5, "pause"), limit)
		if again := n.Plan(Seed(5, "pause"), limit); !reflect.DeepEqual(plan, again) {
			t.Fatalf("%s: the same seed gave two plans", text)
		}
		checkTimedPlan(t, plan, limit)
		seen := map[time.Duration]bool{}
		for i := 0; i < len(plan); i += 2 {
			if plan[i].F != "stop" || plan[i+1].F != "cont" {
				t.Fatalf("%s: ops %q %q", text, plan[i].F, plan[i+1].F)
			}
			seen[plan[i+1].At-plan[i].At] = true
			if n.(*Pause).Target == TargetHolderOne {
				if plan[i].Nodes != nil {
					t.Fatalf("%s: lock-aware pause planned its nodes %v", text, plan[i].Nodes)
				}
			} else if want := map[string]int{TargetOne: 1, TargetMajority: 3}[n.(*Pause).Target]; len(plan[i].Nodes) != want {
				t.Fatalf("%s: pause of %v", text, plan[i].Nodes)
			}
		}
		if len(seen) != len(want) {
			t.Fatalf("%s: pause lengths %v, want %v", text, seen, want)
		}
		for _, d := range want {
			if !seen[d] {
				t.Fatalf("%s: pause lengths %v, want %v", text, seen, want)
			}
		}
	}
}

func TestLatencyPlans(t *testing.T) {
	env := netEnv(fiveNodes, []string{"c1", "c2"})
	env.Interval = time.Second
	limit := 5 * time.Minute
	n := build(t, "latency:target=minority", env).(*Latency)
	plan := n.Plan(Seed(2, "latency"), limit)
	if again := n.Plan(Seed(2, "latency"), limit); !reflect.DeepEqual(plan, again) {
		t.Fatal("the same seed gave two plans")
	}
	checkTimedPlan(t, plan, limit)
	modes := map[string]bool{}
	for i := 0; i < len(plan); i += 2 {
		verb, cuts, err := splitVerb(plan[i].F)
		if err != nil {
			t.Fatal(err)
		}
		modes[verb] = true
		if len(cuts) != 2 || len(plan[i].Nodes) < 1 || len(plan[i].Nodes) > 2 {
			t.Fatalf("fault %q", plan[i].F)
		}
		if d := plan[i+1].At - plan[i].At; d != n.Duration[verb] {
			t.Fatalf("%s lasts %v", verb, d)
		}
	}
	if !modes[LatencySteady] || !modes[LatencySpike] {
		t.Fatalf("modes drawn: %v", modes)
	}
	// Defaults follow the node timeout: steady below it, spikes above.
	if n.Delay[LatencySteady] != 50*time.Millisecond || n.Delay[LatencySpike] != 300*time.Millisecond || n.Jitter[LatencySpike] != 75*time.Millisecond {
		t.Fatalf("delays %v jitter %v", n.Delay, n.Jitter)
	}
	one := build(t, "latency:group=c2:mode=spike:delay=40ms:jitter=0s", env).(*Latency)
	for _, op := range one.Plan(Seed(2, "latency"), limit) {
		if _, cuts, _ := splitVerb(op.F); len(cuts) != 1 || cuts["c2"] == nil {
			t.Fatalf("group=c2 slowed %v", cuts)
		}
	}
}

// Latency on a real link slows the round trip by about the delay, and the heal restores it. The delay
// is large enough that a loaded machine's slow round trip (tens of milliseconds) is not taken for it.
func TestLatencyOnRealLink(t *testing.T) {
	node, l, env := redisBehindLink(t)
	n := build(t, "latency:mode=steady:delay=500ms:jitter=0s", env)
	rc := systems.AdminClient(l.Addr)
	defer rc.Close()
	ctx := context.Background()
	rtt := func() time.Duration {
		began := time.Now()
		if err := rc.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		return time.Since(began)
	}
	rtt()
	if err := n.Apply(ctx, Op{F: "steady c1/" + node.Name, Nodes: []string{node.Name}, Effect: history.EffectFault}); err != nil {
		t.Fatal(err)
	}
	if d := rtt(); d < 490*time.Millisecond || d > 5*time.Second {
		t.Fatalf("round trip %v under a 500ms delay", d)
	}
	for _, h := range n.Healing() {
		if err := n.Apply(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	if d := rtt(); d > 250*time.Millisecond {
		t.Fatalf("round trip %v after the heal", d)
	}
}

// A pause stops the node (it answers nothing) and the heal continues it; a paused node can be
// killed and restarted by another nemesis, and continuing it then is no error; an interrupted run
// still continues every stopped node.
func TestPauseOnRealNodes(t *testing.T) {
	c, err := systems.StartLocal(context.Background(), systems.LocalConfig{Nodes: 2, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	env := netEnv([]string{"n1", "n2"}, []string{"c1"})
	env.Cluster = c
	admin := map[string]func() error{}
	for _, nd := range c.Nodes() {
		a := nd.Admin()
		defer a.Close()
		admin[nd.Name] = func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			return a.Ping(ctx).Err()
		}
	}
	n := build(t, "pause:duration=below", env)
	ctx := context.Background()
	stop := Op{F: "stop", Nodes: []string{"n1"}, Effect: history.EffectFault}
	if err := n.Apply(ctx, stop); err != nil {
		t.Fatal(err)
	}
	if admin["n1"]() == nil {
		t.Fatal("a stopped node answered")
	}
	if err := admin["n2"](); err != nil {
		t.Fatalf("n2: %v", err)
	}
	// Restart composes: the stopped node dies, comes back running, and the heal is harmless.
	if err := c.Kill("n1"); err != nil {
		t.Fatalf("kill a stopped node: %v", err)
	}
	if err := n.Apply(ctx, Op{F: "cont", Nodes: []string{"n1"}, Effect: history.EffectHeal}); err != nil {
		t.Fatalf("cont of a killed node: %v", err)
	}
	if err := c.Start(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := admin["n1"](); err != nil {
		t.Fatalf("restarted node: %v", err)
	}

	// An interrupted run continues what it stopped.
	path := filepath.Join(t.TempDir(), history.FileName)
	rec, err := history.Create(path, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	plan := []Op{
		{At: 10 * time.Millisecond, F: "stop", Nodes: []string{"n1", "n2"}, Effect: history.EffectFault},
		{At: 10 * time.Second, F: "cont", Nodes: []string{"n1", "n2"}, Effect: history.EffectHeal},
	}
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := Run(rctx, n, plan, rec); err != nil {
		t.Fatal(err)
	}
	rec.Close()
	for _, name := range []string{"n1", "n2"} {
		if err := admin[name](); err != nil {
			t.Fatalf("%s after an interrupted run: %v", name, err)
		}
	}
	evs, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 || evs[2].F != "cont" || !reflect.DeepEqual(evs[2].Nodes, []string{"n1", "n2"}) {
		t.Fatalf("history %+v", evs)
	}
}

// Lock-aware targets are chosen when the fault starts, from the lease the nodes hold; the heal
// names what was hit, and no lease of the wanted shape skips the fault.
func TestLockAwareResolve(t *testing.T) {
	c, err := systems.StartLocal(context.Background(), systems.LocalConfig{Nodes: 5, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	env := netEnv(fiveNodes, []string{"c1", "c2"})
	env.Cluster = c
	env.TTL = 300 * time.Millisecond
	env.Probe = probeOver(t, c)
	admin := map[string]*redis.Client{}
	for _, nd := range c.Nodes() {
		admin[nd.Name] = nd.Admin()
		defer admin[nd.Name].Close()
	}
	ctx := context.Background()
	lat := build(t, "latency:target=holder-majority", env).(*Latency)
	lat.Plan(Seed(1, "latency"), time.Minute)
	// No lease: the fault is skipped.
	if op, err := lat.Resolve(ctx, Op{F: LatencySteady, Effect: history.EffectFault}); err != nil || len(op.Nodes) != 0 {
		t.Fatalf("without a lease: %v %v", op, err)
	}
	holders := []string{"n2", "n3", "n5"}
	for _, n := range holders {
		if err := admin[n].Set(ctx, "k", "lease", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	op, err := lat.Resolve(ctx, Op{F: LatencySteady, Effect: history.EffectFault})
	if err != nil || !reflect.DeepEqual(op.Nodes, holders) || op.F != "steady c1/n2,n3,n5 c2/n2,n3,n5" {
		t.Fatalf("holder-majority resolved to %+v, %v", op, err)
	}
	p := build(t, "pause:target=holder-one", env).(*Pause)
	p.Plan(Seed(1, "pause"), time.Minute)
	op, err = p.Resolve(ctx, Op{F: "stop", Effect: history.EffectFault})
	if err != nil || len(op.Nodes) != 1 || !slices.Contains(holders, op.Nodes[0]) {
		t.Fatalf("holder-one resolved to %+v, %v", op, err)
	}
	if err := p.Apply(ctx, op); err != nil {
		t.Fatal(err)
	}
	heal, err := p.Resolve(ctx, Op{F: "cont", Effect: history.EffectHeal})
	if err != nil || !reflect.DeepEqual(heal.Nodes, op.Nodes) {
		t.Fatalf("heal resolved to %+v, %v", heal, err)
	}
	if err := p.Apply(ctx, heal); err != nil {
		t.Fatal(err)
	}
	if p.Healing() != nil {
		t.Fatalf("left to heal: %v", p.Healing())
	}
}

// redisBehindLink starts one redis-server reached by client group c1 through a link, and the
// environment of a nemesis on that link; the test's cleanup stops both.
func redisBehindLink(t *testing.T) (*systems.LocalNode, *links.Link, Env) {
	t.Helper()
	c, err := systems.StartLocal(context.Background(), systems.LocalConfig{Nodes: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	node := c.Nodes()[0]
	set := links.New()
	t.Cleanup(func() { set.Close() })
	l, err := set.Add("c1", node.Name, node.Addr())
	if err != nil {
		t.Fatal(err)
	}
	env := netEnv([]string{node.Name}, []string{"c1"})
	env.Links = set
	return node, l, env
}
