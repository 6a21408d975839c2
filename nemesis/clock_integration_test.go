package nemesis

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/links"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/systems"
	"github.com/lockpick-dev/lockpick/workloads"
)

// Kleppmann's clock scenario, with the partition made by hand: client group c1 is cut from n4 and
// n5, so its leases are held by the bare majority n1 n2 n3, while c2 reaches all five nodes. The
// holder-one target waits for such a lease and jumps one of its nodes forward past the TTL; the key
// expires there, and a c2 client gets that node plus n4 and n5 while the c1 holder still holds.
func TestClockHolderOneBreaksRedlockWithABareMajority(t *testing.T) {
	if testing.Short() {
		t.Skip("runs redis-server for 10 s")
	}
	ctx := context.Background()
	shim, err := systems.BuildClockShim(ctx, t.TempDir())
	if errors.Is(err, systems.ErrNoCompiler) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// LOCKPICK_KEEP=dir keeps the history and node logs for a look with `lockpick check dir`.
	if keep := os.Getenv("LOCKPICK_KEEP"); keep != "" {
		dir = keep
	}
	cluster, err := systems.StartLocal(ctx, systems.LocalConfig{Nodes: 5, Dir: filepath.Join(dir, "nodes"), ClockShim: shim})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	set := links.New()
	defer set.Close()
	groups := []string{"c1", "c2"}
	probe := probeOver(t, cluster)
	for _, n := range cluster.Nodes() {
		for _, g := range groups {
			l, err := set.Add(g, n.Name, n.Addr())
			if err != nil {
				t.Fatal(err)
			}
			if g == "c1" && (n.Name == "n4" || n.Name == "n5") {
				for _, stream := range []string{"upstream", "downstream"} {
					if err := l.AddToxic(links.Toxic{Name: "cut-" + stream, Type: "timeout", Stream: stream, Attributes: map[string]any{"timeout": 0}}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}

	const ttl, limit = 2 * time.Second, 10 * time.Second
	rec, err := history.Create(filepath.Join(dir, history.FileName), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Clocks: cluster, Cluster: cluster, Nodes: fiveNodes, Links: set, Groups: groups, Probe: probe,
		Keys: []string{workloads.KeyName(0)}, TTL: ttl, Interval: 2 * time.Second, NodeTimeout: 100 * time.Millisecond, Recorder: rec}
	spec, _ := ParseSpec("clock:target=holder-one:jump=forward:interval=1s:duration=500ms:wait=2s")
	nem, err := Build(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	plan := nem.Plan(Seed(1, "clock"), limit)
	if len(plan) == 0 {
		t.Fatal("empty plan")
	}
	wenv := workloads.Env{Recorder: rec, NewLocker: func(p int) (locks.Locker, error) {
		// Nine clients in c1, one in c2: c1 holds the lock most of the time (bare-majority leases for
		// holder-one to find), and c2 stands ready to take the jumped node. (With two in c2, whose
		// rounds reach all five nodes and no longer release on the nodes that refused them, c2 held
		// the lock too often for holder-one to find a bare majority in its wait.)
		g := "c1"
		if p%10 == 9 {
			g = "c2"
		}
		var eps []locks.Endpoint
		for _, n := range fiveNodes {
			l, err := set.Get(g, n)
			if err != nil {
				return nil, err
			}
			eps = append(eps, locks.Endpoint{Node: n, Addr: l.Addr})
		}
		return locks.New("redlock", eps, locks.Options{NodeTimeout: 100 * time.Millisecond})
	}}
	faultCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	workCtx, cancelWork := context.WithTimeout(ctx, limit+time.Second)
	defer cancelWork()
	done := make(chan error, 1)
	go func() {
		done <- workloads.Mutex{Clients: 10, Keys: 1, TTL: ttl, Seed: 1}.Run(workCtx, wenv)
	}()
	if err := Run(faultCtx, nem, plan, rec); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	events, err := history.ReadFile(filepath.Join(dir, history.FileName))
	if err != nil {
		t.Fatal(err)
	}
	jumps := 0
	for _, e := range events {
		if e.IsNemesis() && e.Type == history.Invoke && e.F == FBumpForward {
			jumps++
			// The jump hit one node of a c1 lease: one of n1 n2 n3.
			if len(e.Nodes) != 1 {
				t.Fatalf("holder-one jumped %v", e.Nodes)
			}
		}
		if e.IsNemesis() && e.Type == history.Info && e.F == FBumpForward {
			if off := time.Duration(e.Offsets[e.Nodes[0]]); off < 4*time.Second-5*time.Millisecond || off > 4*time.Second+5*time.Millisecond {
				t.Fatalf("measured offset %v, want 4s", off)
			}
		}
	}
	if jumps == 0 {
		t.Fatal("no jump happened")
	}
	res, err := checker.Check(events, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Valid != checker.Invalid || len(res.Violations) == 0 || !strings.Contains(res.Violations[0].Cause, "clock bump-forward") {
		var first int64 = -1
		for _, e := range events {
			if e.IsNemesis() && e.F == FBumpForward && first < 0 {
				first = e.Time
			}
			if first >= 0 && e.Time > first-100e6 && e.Time < first+100e6 && e.F != history.FWork {
				t.Logf("%10.6f p%d %s %s %v %s %s", float64(e.Time)/1e9, e.Process, e.Type, e.F, e.Nodes, e.Value, e.Error)
			}
		}
		t.Fatalf("verdict %v after %d holder-one jumps, want invalid:\n%s", res.Valid, jumps, res.Summary())
	}
	if !strings.Contains(res.Violations[0].Cause, "clock bump-forward") {
		t.Fatalf("cause %q does not name the clock jump:\n%s", res.Violations[0].Cause, res.Summary())
	}
	t.Logf("%d jumps, %d violations:\n%s", jumps, res.ViolationCount, res.Summary())
}

// A quiet reset steps a clock that is behind only when the node holds no lock key: while a key
// written on the slow clock is there, the clock stays behind; once it is gone, the clock is set right
// and a key written afterwards lives its full TTL.
// shiftableNode starts one redis node with the clock shim, and its lease probe, for the quiet reset's
// tests; groups, when given, reach it through links.
func shiftableNode(t *testing.T, groups ...string) (systems.System, locks.ProbeCloser) {
	t.Helper()
	ctx := context.Background()
	shim, err := systems.BuildClockShim(ctx, t.TempDir())
	if errors.Is(err, systems.ErrNoCompiler) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	sys, err := systems.Start(ctx, "redis-masters", systems.Config{Nodes: 1, Dir: t.TempDir(), ClockShim: shim, Groups: groups})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	probe, err := locks.NewProbe("single", sys.Nodes())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { probe.Close() })
	return sys, probe
}

// quietClockBehind builds a clock nemesis with quiet resets over env and puts node's clock 5 s back.
func quietClockBehind(t *testing.T, env Env, node string) *Clock {
	t.Helper()
	spec, _ := ParseSpec("clock:target=all:jump=back:reset=quiet:offset=5s")
	nem, err := Build(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	c := nem.(*Clock)
	if err := c.Apply(context.Background(), Op{F: FBumpBack, Nodes: []string{node}}); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClockQuietResetWaitsForNoLease(t *testing.T) {
	ctx := context.Background()
	sys, probe := shiftableNode(t)
	cluster := sys.Backend()
	node := sys.Nodes()[0]
	admin := systems.AdminClient(node.Addr)
	defer admin.Close()
	key := workloads.KeyName(0)
	env := Env{Clocks: cluster, Cluster: cluster, Nodes: []string{node.Name}, Probe: probe, Writes: sys,
		Keys: []string{key}, TTL: time.Second, Interval: time.Second}
	c := quietClockBehind(t, env, node.Name)
	// A lease written on the slow clock: a step now would expire it at once.
	if err := admin.Set(ctx, key, "holder", 600*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.Apply(ctx, Op{F: FReset, Nodes: []string{node.Name}}) }()
	time.Sleep(200 * time.Millisecond)
	if off, err := cluster.ClockOffset(node.Name); err != nil || off > -4*time.Second {
		t.Fatalf("clock set right while the lease was held: offset %v, %v", off, err)
	}
	if err := admin.Get(ctx, key).Err(); err != nil {
		t.Fatalf("the lease written on the slow clock is gone while waiting: %v", err)
	}
	// The holder releases; the reset follows.
	if err := admin.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("reset did not wait for the release: %v", waited)
	}
	if off, err := cluster.ClockOffset(node.Name); err != nil || off < -50*time.Millisecond || off > 50*time.Millisecond {
		t.Fatalf("clock not set right after the release: offset %v, %v", off, err)
	}
	if err := admin.Set(ctx, key, "next", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if ttl := admin.PTTL(ctx, key).Val(); ttl < 900*time.Millisecond {
		t.Errorf("a key written after the reset lives %v of its 1s", ttl)
	}
}

// On a key no client ever leaves free (a hot key on a loaded machine), a quiet reset drains the node:
// it cuts the clients' links to it until the key is gone, steps, and lets the clients back, rather
// than stepping under a live key, which is a jump forward.
func TestClockQuietResetDrainsAHotKey(t *testing.T) {
	ctx := context.Background()
	sys, probe := shiftableNode(t, "c1")
	cluster := sys.Backend()
	node := sys.Nodes()[0]
	eps, err := sys.Endpoints("c1")
	if err != nil {
		t.Fatal(err)
	}
	key := workloads.KeyName(0)
	env := Env{Clocks: cluster, Cluster: cluster, Nodes: []string{node.Name}, Probe: probe, Writes: sys, Links: sys.Links(),
		Groups: []string{"c1"}, Keys: []string{key}, TTL: 500 * time.Millisecond, Interval: time.Second}
	c := quietClockBehind(t, env, node.Name)
	// A client through the group's link keeps the key taken without a gap.
	hot := systems.AdminClient(eps[0].Addr)
	defer hot.Close()
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for hctx.Err() == nil {
			qctx, cancel := context.WithTimeout(hctx, 50*time.Millisecond)
			hot.Set(qctx, key, "hot", 500*time.Millisecond)
			cancel()
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := c.Apply(ctx, Op{F: FReset, Nodes: []string{node.Name}}); err != nil {
		t.Fatalf("quiet reset of a hot key: %v", err)
	}
	if took := time.Since(start); took < quietLook {
		t.Errorf("the reset found a quiet moment on a key never free (%v)", took)
	}
	if off, err := cluster.ClockOffset(node.Name); err != nil || off < -50*time.Millisecond || off > 50*time.Millisecond {
		t.Fatalf("clock not set right: offset %v, %v", off, err)
	}
	// The clients are let back: the hot client's writes reach the node again.
	admin := systems.AdminClient(node.Addr)
	defer admin.Close()
	deadline := time.Now().Add(2 * time.Second)
	for admin.Exists(ctx, key).Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the clients were not let back after the reset")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, l := range sys.Links().All() {
		if err := l.RemoveToxic(ctx, drainToxic); err == nil {
			t.Fatalf("the drain was left on %s", l.Name())
		}
	}
}
