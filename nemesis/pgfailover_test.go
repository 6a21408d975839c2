package nemesis

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/systems"
)

// reachableTempDir is a temporary directory the postgres user can enter (t.TempDir and its parent
// are private to the harness's user).
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// planOnly is a Promoter for plans and configuration checks, which never promote anything.
type planOnly struct{ t *testing.T }

func (p planOnly) Promote(context.Context, string, string) (string, error) {
	p.t.Fatal("a plan promoted a replica")
	return "", nil
}

func (p planOnly) Rejoin(context.Context, string, string) (string, error) {
	p.t.Fatal("a plan rejoined a node")
	return "", nil
}

// Where lockpick promotes the replica itself, a kill is followed by a promotion detect later, the
// only kind is kill, and a system without a replica is refused.
func TestFailoverOnPostgresPlansAPromotion(t *testing.T) {
	env := netEnv([]string{"pg1", "pg2"}, []string{"c1"})
	env.Promoter = planOnly{t}
	layout, _ := systems.Layout("postgres", systems.Config{Postgres: systems.PostgresConfig{Replicas: 1}})
	env.Roles = systems.StaticRoles(layout)
	spec, _ := ParseSpec("failover:stall=0:detect=700ms:wait=1s:down=2s:interval=5s")
	n, err := Build(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	plan := n.Plan(Seed(1, "failover"), 20*time.Second)
	var fs []string
	var kill, promote time.Duration
	for _, op := range plan {
		fs = append(fs, op.F)
		switch op.F {
		case "kill":
			kill = op.At
		case "promote":
			promote = op.At
		}
	}
	if !slices.Equal(fs[:3], []string{"kill", "promote", "start"}) || promote-kill != 700*time.Millisecond {
		t.Fatalf("plan %v (kill at %v, promote at %v): want kill, promote 700ms later, start", fs, kill, promote)
	}
	spec, _ = ParseSpec("failover:kind=pause")
	if _, err := Build(spec, env); err == nil {
		t.Fatal("failover:kind=pause built where lockpick promotes the replica")
	}
	env.Promoter = nil // a configuration checked before the system runs
	if _, err := Build(spec, env); err == nil {
		t.Fatal("failover:kind=pause built on postgres's layout, which has no sentinel to promote")
	}
	layout, _ = systems.Layout("postgres", systems.Config{})
	env.Roles = systems.StaticRoles(layout)
	spec, _ = ParseSpec("failover")
	if _, err := Build(spec, env); err == nil {
		t.Fatal("failover built on postgres without a replica")
	}
}

// On real postgres servers: the failover nemesis kills the primary just after a grant, promotes the
// replica, which knows no advisory lock, so a second client is granted the key through the same
// path while the first still holds it; the old primary then rejoins as the new one's replica.
func TestFailoverOnPostgresPromotesAndMovesTheClients(t *testing.T) {
	if _, err := systems.FindPostgres(""); err != nil {
		t.Skipf("postgres tests skipped: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	dir := reachableTempDir(t)
	sys, probe := startProbed(ctx, t, "postgres", systems.Config{Dir: dir, Groups: []string{"c1"},
		Postgres: systems.PostgresConfig{Replicas: 1}}, "pg-advisory")
	const key = "lockpick:0"
	env := Env{Cluster: sys.Backend(), Nodes: []string{"pg1", "pg2"}, Links: sys.Links(), Groups: []string{"c1"},
		Roles: sys, Probe: probe, Keys: []string{key}, TTL: 10 * time.Second, Interval: time.Second, Promoter: sys.(systems.Promoter)}
	spec, _ := ParseSpec("failover:stall=0:wait=3s:detect=300ms:down=1s")
	n, err := Build(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	f := n.(*Failover)
	eps, err := sys.Endpoints("c1")
	if err != nil {
		t.Fatal(err)
	}
	a, b := pgLocker(t, eps), pgLocker(t, eps)
	run := func(op Op) Op { return resolveApply(ctx, t, f, op) }
	la, err := a.Acquire(ctx, key, 10*time.Second)
	if err != nil || !slices.Equal(la.Nodes, []string{"pg1"}) {
		t.Fatalf("first acquire: %+v, %v: want a grant by pg1", la, err)
	}
	if kill := run(Op{F: "kill", Effect: history.EffectFault}); !slices.Equal(kill.Nodes, []string{"pg1"}) {
		t.Fatalf("kill resolved to %+v", kill)
	}
	if promote := run(Op{F: "promote", Effect: history.EffectFault}); !slices.Equal(promote.Nodes, []string{"pg2"}) {
		t.Fatalf("promote resolved to %+v", promote)
	}
	if r := sys.Roles(); r["pg1"] != systems.RoleFenced || r["pg2"] != systems.RolePrimary {
		t.Fatalf("roles after the promotion: %v", r)
	}
	lb := acquireWithin(ctx, t, b, key, 5*time.Second)
	if !slices.Equal(lb.Nodes, []string{"pg2"}) {
		t.Fatalf("the second grant came from %v, want the promoted pg2 through c1's path to pg1", lb.Nodes)
	}
	if start := run(Op{F: "start", Effect: history.EffectHeal}); !slices.Equal(start.Nodes, []string{"pg1"}) {
		t.Fatalf("start resolved to %+v", start)
	}
	if r := sys.Roles(); r["pg1"] != systems.RoleReplica || r["pg2"] != systems.RolePrimary {
		t.Fatalf("roles after the rejoin: %v, want pg1 the replica of pg2", r)
	}
	if h := f.Healing(); len(h) != 0 {
		t.Fatalf("after the rejoin the nemesis still has to heal %v", h)
	}
	var pids []int
	for _, node := range []string{"pg1", "pg2"} {
		b, err := os.ReadFile(filepath.Join(dir, node, "data", "postmaster.pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
		pids = append(pids, pid)
	}
	if err := sys.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if live := systems.LiveGroupMembers(pid); len(live) > 0 {
			t.Fatalf("processes %v of postmaster %d's group outlived the system", live, pid)
		}
	}
}

// pgLocker is a pg-advisory client of the endpoints; closed with the test.
func pgLocker(t *testing.T, eps []systems.Endpoint) locks.Locker {
	t.Helper()
	l, err := locks.New("pg-advisory", eps, locks.Options{NodeTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// acquireWithin retries an acquire of key until it is granted or d passes.
func acquireWithin(ctx context.Context, t *testing.T, l locks.Locker, key string, d time.Duration) *locks.Lease {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		lease, err := l.Acquire(ctx, key, 10*time.Second)
		if err == nil {
			return lease
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no grant of %s within %v", key, d)
	return nil
}
