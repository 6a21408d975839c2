package nemesis

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/systems"
)

var fiveNodes = []string{"n1", "n2", "n3", "n4", "n5"}

func TestPlanIsReproducibleFromTheSeed(t *testing.T) {
	for _, delay := range []time.Duration{0, 3 * time.Second} {
		r := &Restart{Nodes: fiveNodes, Interval: 2 * time.Second, Delay: delay}
		a := r.Plan(Seed(7, r.Name()), time.Minute)
		b := r.Plan(Seed(7, r.Name()), time.Minute)
		c := r.Plan(Seed(8, r.Name()), time.Minute)
		if len(a) == 0 {
			t.Fatal("empty plan")
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatal("the same seed gave two plans")
		}
		if reflect.DeepEqual(a, c) {
			t.Fatal("two seeds gave the same plan")
		}
	}
}

// Replays a plan and checks what the restart nemesis promises: ordered, inside the time limit,
// one fault at a time, majorities and single nodes both drawn, and each delayed node down long enough.
func TestRestartPlanInvariants(t *testing.T) {
	for _, delay := range []time.Duration{0, 3 * time.Second} {
		r := &Restart{Nodes: fiveNodes, Interval: 2 * time.Second, Delay: delay}
		limit := 2 * time.Minute
		plan := r.Plan(Seed(1, r.Name()), limit)
		down := map[string]time.Duration{}
		var majority, single, faults int
		var inFault []string
		for i, op := range plan {
			if i > 0 && op.At < plan[i-1].At {
				t.Fatalf("op %d out of order", i)
			}
			if op.At >= limit {
				t.Fatalf("op %d at %v is past the time limit", i, op.At)
			}
			switch op.F {
			case "kill":
				if len(down) == 0 {
					// A new fault begins; the previous one has fully healed.
					if len(inFault) > 0 {
						faults++
						if len(inFault) == 3 {
							majority++
						} else if len(inFault) == 1 {
							single++
						} else {
							t.Fatalf("fault with %d nodes", len(inFault))
						}
					}
					inFault = nil
				}
				n := op.Nodes[0]
				if _, ok := down[n]; ok {
					t.Fatalf("%s killed twice", n)
				}
				down[n] = op.At
				inFault = append(inFault, n)
			case "start":
				for _, n := range op.Nodes {
					at, ok := down[n]
					if !ok {
						t.Fatalf("%s started while up", n)
					}
					if op.At-at < delay {
						t.Fatalf("%s down %v, less than the delay %v", n, op.At-at, delay)
					}
					delete(down, n)
				}
			}
		}
		if len(down) != 0 {
			t.Fatalf("plan ends with nodes down: %v", down)
		}
		if majority == 0 || single == 0 {
			t.Fatalf("delay %v: %d majority and %d single-node faults; want both", delay, majority, single)
		}
	}
}

// Runs a short plan against real nodes and checks the history and the final heal.
func TestRunRecordsAndHeals(t *testing.T) {
	c, err := systems.StartLocal(context.Background(), systems.LocalConfig{Nodes: 3, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	path := filepath.Join(t.TempDir(), history.FileName)
	rec, err := history.Create(path, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &Restart{Cluster: c, Nodes: []string{"n1", "n2", "n3"}, Interval: time.Second, Delay: 300 * time.Millisecond}
	plan := []Op{
		{At: 50 * time.Millisecond, F: "kill", Nodes: []string{"n1"}, Effect: history.EffectFault},
		{At: 60 * time.Millisecond, F: "kill", Nodes: []string{"n2"}, Effect: history.EffectFault},
		{At: 10 * time.Second, F: "start", Nodes: []string{"n1"}, Effect: history.EffectHeal},
	}
	// The run is cut off at 200ms; the heal must still wait out n1's and n2's delay.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	if err := Run(ctx, r, plan, rec); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 350*time.Millisecond {
		t.Fatalf("heal took %v: it did not keep the nodes down for the delay", took)
	}
	rec.Close()
	for _, n := range []string{"n1", "n2", "n3"} {
		if !c.Running(n) {
			t.Fatalf("%s still down after Run", n)
		}
	}
	evs, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		if !e.IsNemesis() || e.Fault != "restart-delayed" {
			t.Fatalf("unexpected event %+v", e)
		}
		got = append(got, string(e.Type)+" "+e.F+" "+e.Effect+" "+strings.Join(e.Nodes, ","))
	}
	want := []string{
		"invoke kill fault n1", "info kill fault n1",
		"invoke kill fault n2", "info kill fault n2",
		"invoke start heal n1,n2", "info start heal n1,n2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("history\n got %q\nwant %q", got, want)
	}
}

// A lock-aware restart plans kills and starts without nodes (Resolve chooses them), keeps a delayed
// start at least Delay after its kill, and heals every fault inside the time limit.
func TestRestartLockAwarePlan(t *testing.T) {
	for _, spec := range []string{"restart:target=holder-majority", "restart-delayed:target=holder:delay=3s"} {
		s, _ := ParseSpec(spec)
		n, err := Build(s, Env{Nodes: fiveNodes, TTL: 2 * time.Second, Interval: 2 * time.Second, RestartDelay: 3 * time.Second, Keys: []string{"k"}})
		if err != nil {
			t.Fatal(err)
		}
		r := n.(*Restart)
		limit := time.Minute
		plan := r.Plan(Seed(1, r.Name()), limit)
		if len(plan) < 4 || len(plan)%2 != 0 {
			t.Fatalf("%s: plan of %d ops", spec, len(plan))
		}
		for i := 0; i < len(plan); i += 2 {
			kill, start := plan[i], plan[i+1]
			if kill.F != "kill" || start.F != "start" || len(kill.Nodes) != 0 || len(start.Nodes) != 0 {
				t.Fatalf("%s: ops %d, %d are %v, %v; want a kill and a start to be resolved", spec, i, i+1, kill, start)
			}
			if start.At-kill.At < r.Delay || start.At >= limit {
				t.Fatalf("%s: kill at %v, start at %v (delay %v, limit %v)", spec, kill.At, start.At, r.Delay, limit)
			}
		}
	}
}

func TestRestartRefusesWaitWithoutALockAwareTarget(t *testing.T) {
	s, _ := ParseSpec("restart:target=majority:wait=1s")
	if _, err := Build(s, Env{Nodes: fiveNodes, TTL: time.Second, Interval: time.Second}); err == nil || !strings.Contains(err.Error(), "target=holder") {
		t.Fatalf("err = %v, want a refusal naming the lock-aware targets", err)
	}
	s, _ = ParseSpec("restart:target=holders")
	if _, err := Build(s, Env{Nodes: fiveNodes, TTL: time.Second, Interval: time.Second}); err == nil || !strings.Contains(err.Error(), "holder-majority") {
		t.Fatalf("err = %v, want the allowed targets", err)
	}
}

// Against real nodes: a lease granted by n1 n2 n4 after the fault began to look is found (not the
// older majority lease of another key), exactly its nodes are killed, the start brings the same nodes
// back empty, and with no new majority lease in sight the fault is skipped and its start has nothing
// to bring back (no heal without a fault).
func TestRestartHolderMajorityHitsTheLeaseNodes(t *testing.T) {
	ctx := context.Background()
	c, err := systems.StartLocal(ctx, systems.LocalConfig{Nodes: 5, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	admin := map[string]*redis.Client{}
	for _, n := range c.Nodes() {
		admin[n.Name] = n.Admin()
		defer admin[n.Name].Close()
	}
	set := func(key, value string, nodes ...string) {
		for _, n := range nodes {
			if err := admin[n].Set(ctx, key, value, time.Minute).Err(); err != nil {
				t.Error(err)
			}
		}
	}
	const fresh, old = "lockpick:0", "lockpick:1"
	// A majority lease held before the fault starts: half through its hold, not the target.
	set(old, "lease-old", "n3", "n4", "n5")
	env := Env{Cluster: c, Nodes: fiveNodes, Probe: probeOver(t, c), Keys: []string{fresh, old}, TTL: time.Second, Interval: time.Second}
	s, _ := ParseSpec("restart:target=holder-majority:wait=2s")
	n, err := Build(s, env)
	if err != nil {
		t.Fatal(err)
	}
	r := n.(*Restart)
	r.Plan(Seed(1, r.Name()), 10*time.Second)
	go func() {
		time.Sleep(200 * time.Millisecond)
		set(fresh, "lease-a", "n1", "n2", "n4")
	}()
	kill, err := r.Resolve(ctx, Op{F: "kill", Effect: history.EffectFault})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"n1", "n2", "n4"}; !reflect.DeepEqual(kill.Nodes, want) {
		t.Fatalf("kill resolved to %v, want the lease's nodes %v", kill.Nodes, want)
	}
	if err := r.Apply(ctx, kill); err != nil {
		t.Fatal(err)
	}
	for _, node := range kill.Nodes {
		if c.Running(node) {
			t.Fatalf("%s still running after the kill", node)
		}
	}
	start, err := r.Resolve(ctx, Op{F: "start", Effect: history.EffectHeal})
	if err != nil || !reflect.DeepEqual(start.Nodes, kill.Nodes) {
		t.Fatalf("start resolved to %v (%v), want %v", start.Nodes, err, kill.Nodes)
	}
	if err := r.Apply(ctx, start); err != nil {
		t.Fatal(err)
	}
	for _, node := range kill.Nodes {
		if err := admin[node].Get(ctx, fresh).Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("%s after restart without persistence: GET = %v, want no key", node, err)
		}
	}
	// The old lease is left on n3 n5, a minority: no majority lease, so the fault is skipped.
	skipped, err := r.Resolve(ctx, Op{F: "kill", Effect: history.EffectFault})
	if err != nil || len(skipped.Nodes) != 0 {
		t.Fatalf("kill without a majority lease resolved to %v (%v), want skipped", skipped.Nodes, err)
	}
	if start, _ := r.Resolve(ctx, Op{F: "start", Effect: history.EffectHeal}); len(start.Nodes) != 0 {
		t.Fatalf("start after a skipped kill resolved to %v, want nothing", start.Nodes)
	}
}

// at=grant holds a drawn fault's first kill until a grant recorded after its planned time, and only
// its first: the rest of a majority follow at once, and a fault with no grant in time goes ahead
// as planned after the wait. Drawn nodes are kept; lock-aware targets refuse it.
func TestRestartAtGrantTimesTheFirstKill(t *testing.T) {
	view := &fakeHolders{}
	// A wait of 1.5 s: long enough that a loaded machine's delays cannot pass for it, or it for them.
	env := Env{Nodes: fiveNodes, TTL: 3 * time.Second, Interval: 3 * time.Second, Holders: view}
	s, _ := ParseSpec("restart:target=majority:at=grant")
	n, err := Build(s, env)
	if err != nil {
		t.Fatal(err)
	}
	r := n.(*Restart)
	if !r.AtGrant || r.GrantWait != 1500*time.Millisecond {
		t.Fatalf("at=grant: AtGrant %v, GrantWait %v; want true, 1.5s (min(interval, TTL)/2)", r.AtGrant, r.GrantWait)
	}
	plan := r.Plan(Seed(1, r.Name()), 30*time.Second)
	first, second := plan[0], plan[1]
	if first.F != "kill" || second.F != "kill" || len(first.Nodes) != 1 {
		t.Fatalf("plan starts %v, %v; want two kills of a majority", first, second)
	}
	ctx := context.Background()

	view.set(Holder{Process: 1, Since: time.Now().Add(-time.Second)}) // an old hold does not count
	view.grantLater(150*time.Millisecond, Holder{Process: 2})
	began := time.Now()
	got, err := r.Resolve(ctx, first)
	if took := time.Since(began); err != nil || took < 150*time.Millisecond || took > time.Second {
		t.Fatalf("first kill resolved after %v (err %v); want it held until the grant at 150ms", took, err)
	}
	if !reflect.DeepEqual(got.Nodes, first.Nodes) {
		t.Fatalf("first kill resolved to %v; want its drawn nodes %v", got.Nodes, first.Nodes)
	}
	began = time.Now()
	if _, err := r.Resolve(ctx, second); err != nil || time.Since(began) > 500*time.Millisecond {
		t.Fatalf("second kill of the fault waited %v (err %v); want at once", time.Since(began), err)
	}

	view.set()
	began = time.Now()
	got, err = r.Resolve(ctx, first)
	if took := time.Since(began); err != nil || took < 1500*time.Millisecond || len(got.Nodes) == 0 {
		t.Fatalf("no grant: resolved to %v after %v (err %v); want the planned nodes after the 1.5s wait", got.Nodes, took, err)
	}

	s, _ = ParseSpec("restart:target=holder-majority:at=grant")
	if _, err := Build(s, env); err == nil || !strings.Contains(err.Error(), "drop at=grant") {
		t.Fatalf("at=grant with a lock-aware target: err %v, want a refusal", err)
	}
}
