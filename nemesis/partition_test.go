package nemesis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/links"
	"github.com/lockpick-dev/lockpick/systems"
)

func netEnv(nodes, groups []string) Env {
	return Env{Nodes: nodes, Groups: groups, TTL: 2 * time.Second, Interval: 5 * time.Second, NodeTimeout: 100 * time.Millisecond, Keys: []string{"k"}}
}

func build(t *testing.T, text string, env Env) Nemesis {
	t.Helper()
	s, err := ParseSpec(text)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Build(s, env)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkTimedPlan checks what every timed nemesis promises: ordered, inside the limit, one fault at a
// time, each fault healed by the next operation and naming the same nodes.
func checkTimedPlan(t *testing.T, plan []Op, limit time.Duration) {
	t.Helper()
	if len(plan) == 0 || len(plan)%2 != 0 {
		t.Fatalf("plan has %d operations", len(plan))
	}
	for i, op := range plan {
		if i > 0 && op.At <= plan[i-1].At {
			t.Fatalf("op %d (%v) not after op %d (%v)", i, op.At, i-1, plan[i-1].At)
		}
		if op.At >= limit {
			t.Fatalf("op %d at %v is past the limit %v", i, op.At, limit)
		}
		want := history.EffectFault
		if i%2 == 1 {
			want = history.EffectHeal
			if !reflect.DeepEqual(op.Nodes, plan[i-1].Nodes) {
				t.Fatalf("heal %d names %v, fault names %v", i, op.Nodes, plan[i-1].Nodes)
			}
		}
		if op.Effect != want {
			t.Fatalf("op %d %q has effect %s, want %s", i, op.F, op.Effect, want)
		}
	}
}

func TestPartitionPlans(t *testing.T) {
	nodes := fiveNodes
	for _, groups := range [][]string{{"c1"}, {"c1", "c2"}, {"c1", "c2", "c3"}} {
		env := netEnv(nodes, groups)
		env.Interval = time.Second
		n := build(t, "partition", env)
		limit := 5 * time.Minute
		plan := n.Plan(Seed(3, "partition"), limit)
		if again := n.Plan(Seed(3, "partition"), limit); !reflect.DeepEqual(plan, again) {
			t.Fatal("the same seed gave two plans")
		}
		if other := n.Plan(Seed(4, "partition"), limit); reflect.DeepEqual(plan, other) {
			t.Fatal("two seeds gave the same plan")
		}
		checkTimedPlan(t, plan, limit)
		for i, op := range plan {
			verb, cuts, err := splitVerb(op.F)
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"cut", "heal"}[i%2]; verb != want {
				t.Fatalf("op %d is %q, want %s", i, op.F, want)
			}
			if !reflect.DeepEqual(cuts.Nodes(), op.Nodes) || len(op.Nodes) == 0 {
				t.Fatalf("op %q names nodes %v", op.F, op.Nodes)
			}
			if i%2 == 1 && plan[i].At-plan[i-1].At != 2*env.TTL {
				t.Fatalf("partition lasts %v, want 2×TTL", plan[i].At-plan[i-1].At)
			}
		}
	}
}

// Each kind cuts what it says, for one and for two client groups.
func TestPartitionKinds(t *testing.T) {
	for _, groups := range [][]string{{"c1"}, {"c1", "c2"}} {
		env := netEnv(fiveNodes, groups)
		for _, kind := range PartitionKinds() {
			n := build(t, "partition:kind="+kind, env).(*Partition)
			for seed := range uint64(20) {
				rng := Seed(seed, "partition")
				cuts := n.draw(rng, kind)
				seen := map[string][]string{} // group -> nodes it still reaches
				for _, g := range groups {
					for _, node := range fiveNodes {
						if !slices.Contains(cuts[g], node) {
							seen[g] = append(seen[g], node)
						}
					}
				}
				desc := fmt.Sprintf("%d groups, kind %s: cuts %v", len(groups), kind, cuts)
				switch kind {
				case PartIsolate:
					if len(cuts) != len(groups) || len(cuts.Nodes()) != 1 {
						t.Fatal(desc)
					}
				case PartClientMinority, PartClientMajority:
					if len(cuts) != 1 {
						t.Fatal(desc)
					}
					if kind == PartClientMajority && len(cuts.Nodes()) != 3 {
						t.Fatal(desc)
					}
					if kind == PartClientMinority && len(cuts.Nodes()) > 2 {
						t.Fatal(desc)
					}
				case PartClientAll:
					if len(cuts) != 1 || len(cuts.Nodes()) != 5 {
						t.Fatal(desc)
					}
				case PartBridge:
					if len(groups) == 1 {
						if len(seen["c1"]) != 3 {
							t.Fatal(desc)
						}
						continue
					}
					// Both see a bare majority, and the majorities share exactly one node.
					a, b := seen["c1"], seen["c2"]
					var common int
					for _, x := range a {
						if slices.Contains(b, x) {
							common++
						}
					}
					if len(a) != 3 || len(b) != 3 || common != 1 {
						t.Fatal(desc)
					}
				case PartHalves:
					if len(groups) == 1 {
						if len(seen["c1"]) != 2 && len(seen["c1"]) != 3 {
							t.Fatal(desc)
						}
						continue
					}
					a, b := seen["c1"], seen["c2"]
					if len(a)+len(b) != 5 || slices.ContainsFunc(a, func(x string) bool { return slices.Contains(b, x) }) {
						t.Fatal(desc)
					}
				}
			}
		}
	}
}

// Every kind of the default list is drawn.
func TestPartitionDrawsEveryKind(t *testing.T) {
	env := netEnv(fiveNodes, []string{"c1", "c2"})
	env.Interval = time.Second
	n := build(t, "partition", env).(*Partition)
	plan := n.Plan(Seed(1, "partition"), 10*time.Minute)
	shapes := map[string]bool{}
	for _, op := range plan {
		_, cuts, _ := splitVerb(op.F)
		switch {
		case len(cuts) == 2 && len(cuts.Nodes()) == 1:
			shapes["isolate"] = true
		case len(cuts) == 1 && len(cuts.Nodes()) == 3:
			shapes["majority"] = true
		case len(cuts) == 1 && len(cuts.Nodes()) <= 2:
			shapes["minority"] = true
		case len(cuts) == 2 && len(cuts.Nodes()) == 4:
			shapes["bridge"] = true
		case len(cuts) == 2 && len(cuts.Nodes()) == 5:
			shapes["halves"] = true
		}
	}
	if len(shapes) != 5 {
		t.Fatalf("drew only %v", shapes)
	}
}

func TestPartitionParamErrors(t *testing.T) {
	env := netEnv(fiveNodes, []string{"c1", "c2"})
	for text, want := range map[string]string{
		"partition:kind=split":          "use one or more of isolate, client-minority, client-majority, client-all, bridge, halves",
		"partition:mode=slow":           "use one of drop, reset, lose-reply",
		"partition:group=c9":            "use one of c1, c2",
		"partition:duration=0s":         "duration must be positive",
		"partition:colour=red":          `unknown parameter "colour"`,
		"latency:mode=slow":             "use one or more of steady, spike",
		"latency:target=holder-one":     "use one of one, minority, majority, all, holder, holder-majority",
		"latency:delay=1ms":             "below toxiproxy's resolution",
		"pause:duration=long":           "use one of below (TTL/2), around (TTL), above (2×TTL)",
		"pause:target=some":             "use one of one, minority",
		"partition:kind=bridge:speed=1": `unknown parameter "speed"`,
	} {
		s, err := ParseSpec(text)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Build(s, env)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to say %q", text, err, want)
		}
	}
	s, _ := ParseSpec("partition:kind=bridge")
	if _, err := Build(s, netEnv([]string{"n1"}, []string{"c1"})); err == nil || !strings.Contains(err.Error(), "needs at least 3 nodes") {
		t.Errorf("bridge on one node: %v", err)
	}
}

// The three modes against a real redis-server behind a link: drop hangs and delivers nothing, reset
// fails at once and delivers nothing (on open and on new connections), lose-reply delivers the write
// and loses the reply (on open connections: go-redis greets a new one with HELLO, whose reply is lost). Healing restores the path.
func TestPartitionModesOnRealLinks(t *testing.T) {
	c, err := systems.StartLocal(context.Background(), systems.LocalConfig{Nodes: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	node := c.Nodes()[0]
	admin := node.Admin()
	defer admin.Close()
	set := links.New()
	defer set.Close()
	l, err := set.Add("c1", node.Name, node.Addr())
	if err != nil {
		t.Fatal(err)
	}
	// A reset must fail a request within half of this: 1 s, so that a loaded machine's slow wake-up is
	// not taken for a hang.
	const timeout = time.Second
	client := func() *redis.Client {
		return redis.NewClient(&redis.Options{Addr: l.Addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, DisableIdentity: true, Protocol: 2})
	}
	ctx := context.Background()
	env := netEnv([]string{node.Name}, []string{"c1"})
	env.Links = set
	for _, mode := range PartitionModes() {
		t.Run(mode, func(t *testing.T) {
			n := build(t, "partition:kind=isolate:mode="+mode, env)
			old := client()
			defer old.Close()
			if err := old.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			cut := Op{F: "cut c1/" + node.Name, Nodes: []string{node.Name}, Effect: history.EffectFault}
			if err := n.Apply(ctx, cut); err != nil {
				t.Fatal(err)
			}
			fresh := client()
			defer fresh.Close()
			for name, rc := range map[string]*redis.Client{"open": old, "new": fresh} {
				key := mode + "-" + name
				began := time.Now()
				err := rc.Set(ctx, key, "v", 0).Err()
				took := time.Since(began)
				if err == nil {
					t.Fatalf("%s connection: SET crossed a cut link", name)
				}
				time.Sleep(50 * time.Millisecond) // a delivered write has surely landed by now
				landed := admin.Exists(ctx, key).Val() == 1
				switch mode {
				case ModeDrop:
					if took < timeout*3/4 || landed {
						t.Fatalf("%s connection: failed after %v, landed %v; want a hang until the timeout and nothing delivered", name, took, landed)
					}
				case ModeReset:
					if took > timeout/2 || landed || errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("%s connection: failed after %v (%v), landed %v; want an immediate reset and nothing delivered", name, took, err, landed)
					}
				case ModeStall:
					if took < timeout*3/4 || landed {
						t.Fatalf("%s connection: failed after %v, landed %v; want a hang until the timeout and nothing delivered yet", name, took, landed)
					}
				case ModeLoseReply:
					// go-redis greets every new connection with HELLO and waits for the reply, which is
					// lost: only writes on connections opened before the cut land.
					if took < timeout*3/4 || landed != (name == "open") {
						t.Fatalf("%s connection: failed after %v, landed %v; want the write delivered and the reply lost", name, took, landed)
					}
				}
				t.Logf("%s connection: %v after %v, landed %v", name, err, took, landed)
			}
			for _, h := range n.Healing() {
				if err := n.Apply(ctx, h); err != nil {
					t.Fatal(err)
				}
			}
			if h := n.Healing(); h != nil {
				t.Fatalf("still to heal after the heal: %v", h)
			}
			after := client()
			defer after.Close()
			if err := after.Set(ctx, mode+"-after", "v", 0).Err(); err != nil {
				t.Fatalf("after the heal: %v", err)
			}
		})
	}
}

// client-all cuts the holder's group from every member (a quorum system's client reaches the
// leader through any member it still sees), and is drawn only when asked for.
func TestPartitionClientAll(t *testing.T) {
	n := build(t, "partition:group=holder:kind=client-all", netEnv(fiveNodes, []string{"c1", "c2"})).(*Partition)
	if got := n.resolveNodes(); !reflect.DeepEqual(got, fiveNodes) {
		t.Fatalf("client-all of the holder's group cuts %v, want %v", got, fiveNodes)
	}
	if d := build(t, "partition", netEnv(fiveNodes, []string{"c1"})).(*Partition); slices.Contains(d.Kinds, PartClientAll) {
		t.Fatalf("the default kinds %v draw client-all", d.Kinds)
	}
}

// On one node the default draws only the kinds a single node allows.
func TestPartitionDefaultKindsFitTheCluster(t *testing.T) {
	n := build(t, "partition", netEnv([]string{"n1"}, []string{"c1"})).(*Partition)
	if want := []string{PartIsolate, PartClientMinority, PartClientMajority}; !reflect.DeepEqual(n.Kinds, want) {
		t.Fatalf("kinds %v, want %v", n.Kinds, want)
	}
}

// A stall keeps the connection it held, as TCP does through a partition: a request sent during the
// cut is answered after the heal on the same connection (the timeout toxic of drop closes it).
func TestPartitionStallKeepsConnections(t *testing.T) {
	node, l, env := redisBehindLink(t)
	conn, err := net.DialTimeout("tcp", l.Addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	ping := func(want bool) {
		t.Helper()
		conn.SetDeadline(time.Now().Add(2 * time.Second))
		line, err := r.ReadString('\n')
		if got := err == nil && line == "+PONG\r\n"; got != want {
			t.Fatalf("reply %q (%v), want an answer: %v", line, err, want)
		}
	}
	fmt.Fprint(conn, "PING\r\n")
	ping(true)
	ctx := context.Background()
	n := build(t, "partition:kind=isolate:mode=stall", env)
	if err := n.Apply(ctx, Op{F: "cut c1/" + node.Name, Nodes: []string{node.Name}, Effect: history.EffectFault}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(conn, "PING\r\n")
	conn.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("an answer crossed the stall: %q", line)
	}
	for _, h := range n.Healing() {
		if err := n.Apply(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	ping(true)
}
