package systems

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/links"
)

// startPostgresReplica starts the postgres system with one replica, or skips saying what to
// install; it returns the system and its directory.
func startPostgresReplica(t *testing.T, synchronous bool) (System, string) {
	t.Helper()
	if _, err := FindPostgres(""); err != nil {
		t.Skipf("postgres tests skipped: %v", err)
	}
	dir := pgTestDir(t)
	sys, err := Start(context.Background(), "postgres", Config{Dir: dir, Groups: []string{"c1"},
		Postgres: PostgresConfig{Replicas: 1, Synchronous: synchronous},
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	return sys, dir
}

// pgExec runs sql on a fresh connection to addr.
func pgExec(ctx context.Context, addr, sql string) error {
	c, err := PostgresAdmin(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	_, err = c.Exec(ctx, sql)
	return err
}

// pgCount counts the rows of table t at addr.
func pgCount(ctx context.Context, addr, table string) (int, error) {
	c, err := PostgresAdmin(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var n int
	err = c.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n)
	return n, err
}

// waitCount waits up to d for table to hold want rows at addr.
func waitCount(ctx context.Context, addr, table string, want int, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	for {
		n, err := pgCount(ctx, addr, table)
		if (err == nil && n == want) || time.Now().After(deadline) {
			return n, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// postmasterPid reads the pid of a node's postmaster from its data directory.
func postmasterPid(t *testing.T, dir, node string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, node, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// The replica copies the primary by streaming through its link to it (a stall of that link holds
// the rows back), reports itself a replica, and a promotion makes it the primary that the clients'
// path to the old primary now reaches; the old primary rejoins as its replica; nothing of either
// server outlives Close.
func TestPostgresReplicaStreamsThroughItsLinkAndIsPromoted(t *testing.T) {
	sys, dir := startPostgresReplica(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	primary, replica := sys.Nodes()[0], sys.Nodes()[1]
	if primary.Name != "pg1" || replica.Name != "pg2" || !replica.Data {
		t.Fatalf("nodes %v: want pg1 and its replica pg2", sys.Nodes())
	}
	if r := sys.Roles(); r["pg1"] != RolePrimary || r["pg2"] != RoleReplica {
		t.Fatalf("roles %v: want pg1 primary, pg2 replica", r)
	}
	if err := pgExec(ctx, primary.Addr, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if n, err := waitCount(ctx, replica.Addr, "t", 1, 5*time.Second); n != 1 {
		t.Fatalf("the replica has %d rows (%v), want 1: it does not stream", n, err)
	}
	repl, err := sys.Links().Get("pg2", "pg1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range links.Stall("stall") {
		if err := repl.AddToxic(tx); err != nil {
			t.Fatal(err)
		}
	}
	if err := pgExec(ctx, primary.Addr, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	if n, _ := waitCount(ctx, replica.Addr, "t", 2, 700*time.Millisecond); n != 1 {
		t.Fatalf("the replica has %d rows while its link to the primary is stalled, want 1: it does not stream through the link", n)
	}
	if err := sys.Links().Renew(repl); err != nil {
		t.Fatal(err)
	}
	if n, err := waitCount(ctx, replica.Addr, "t", 2, 15*time.Second); n != 2 {
		t.Fatalf("the replica has %d rows (%v) after the stall, want 2", n, err)
	}
	rows := promoteAndCheck(ctx, t, sys)
	did, err := sys.(Promoter).Rejoin(ctx, "pg1", "pg2")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(did)
	if n, err := waitCount(ctx, primary.Addr, "t", rows, 10*time.Second); n != rows {
		t.Fatalf("the rejoined pg1 has %d rows (%v), want the new primary's %d", n, err, rows)
	}
	deadline := time.Now().Add(2 * time.Second)
	for sys.Roles()["pg1"] != RoleReplica && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if r := sys.Roles(); r["pg1"] != RoleReplica || r["pg2"] != RolePrimary {
		t.Fatalf("roles after the rejoin %v: want pg1 replica, pg2 primary", r)
	}
	pids := []int{postmasterPid(t, dir, "pg1"), postmasterPid(t, dir, "pg2")}
	if err := sys.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if live := LiveGroupMembers(pid); len(live) > 0 {
			t.Fatalf("processes %v of postmaster %d's group outlived Close", live, pid)
		}
	}
}

// promoteAndCheck kills pg1, promotes pg2, and checks the roles and that client group c1's path to
// pg1, and through each pooler, reaches the new primary, which takes writes. It returns the rows the
// new primary has.
func promoteAndCheck(ctx context.Context, t *testing.T, sys System) int {
	t.Helper()
	if err := sys.Backend().Kill("pg1"); err != nil {
		t.Fatal(err)
	}
	did, err := sys.(Promoter).Promote(ctx, "pg1", "pg2")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(did)
	if r := sys.Roles(); r["pg1"] != RoleFenced || r["pg2"] != RolePrimary {
		t.Fatalf("roles after the promotion %v: want pg1 fenced, pg2 primary", r)
	}
	eps, err := sys.Endpoints("c1")
	if err != nil || eps[0].Node != "pg1" {
		t.Fatalf("endpoints %v, %v", eps, err)
	}
	if err := pgExec(ctx, eps[0].Addr, "INSERT INTO t VALUES (3)"); err != nil {
		t.Fatalf("c1's path to pg1 after the failover: %v", err)
	}
	want := 3
	for _, ep := range eps {
		if ep.Role != RolePooler {
			continue
		}
		if err := pgExec(ctx, ep.Addr, "INSERT INTO t VALUES (4)"); err != nil {
			t.Fatalf("c1's path through %s after the failover: %v", ep.Node, err)
		}
		want++
	}
	if n, err := pgCount(ctx, sys.Nodes()[1].Addr, "t"); n != want {
		t.Fatalf("the promoted pg2 has %d rows (%v), want %d: c1's paths (to pg1, through the poolers) did not lead there", n, err, want)
	}
	return want
}

// With synchronous replication a commit waits for the replica: stalling its link holds the commit.
func TestPostgresSynchronousCommitWaitsForTheReplica(t *testing.T) {
	sys, _ := startPostgresReplica(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	primary := sys.Nodes()[0]
	if err := pgExec(ctx, primary.Addr, "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	repl, err := sys.Links().Get("pg2", "pg1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range links.Stall("stall") {
		if err := repl.AddToxic(tx); err != nil {
			t.Fatal(err)
		}
	}
	qctx, qcancel := context.WithTimeout(ctx, 700*time.Millisecond)
	err = pgExec(qctx, primary.Addr, "INSERT INTO t VALUES (1)")
	qcancel()
	if err == nil {
		t.Fatal("a synchronous commit returned while the replica's link was stalled")
	}
	if err := sys.Links().Renew(repl); err != nil {
		t.Fatal(err)
	}
	if err := pgExec(ctx, primary.Addr, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatalf("a synchronous commit after the stall: %v", err)
	}
}

func TestPostgresSizeAndSyncNames(t *testing.T) {
	for _, c := range []struct {
		size Size
		ok   bool
	}{
		{Size{}, true}, {Size{Replicas: 1}, true}, {Size{Replicas: 2}, false}, {Size{Sentinels: 3}, false}, {Size{Nodes: 2}, false},
	} {
		if err := (postgresTopology{}).Size(&c.size); (err == nil) != c.ok {
			t.Errorf("Size(%+v): %v, want ok %v", c.size, err, c.ok)
		}
	}
	nodes, err := postgresTopology{}.Layout(Config{Postgres: PostgresConfig{Replicas: 1}})
	if err != nil || nodes[0].Name != "pg1" || nodes[1].Name != "pg2" || nodes[1].Role != RoleReplica || !nodes[1].Data {
		t.Fatalf("layout %v, %v: want pg1 and its replica pg2", nodes, err)
	}
	if got := pgSyncNames(PostgresConfig{Replicas: 1}, nodes, "pg1"); got != "" {
		t.Errorf("asynchronous replication names %q synchronous standbys", got)
	}
	sync := PostgresConfig{Replicas: 1, Synchronous: true}
	if a, b := pgSyncNames(sync, nodes, "pg1"), pgSyncNames(sync, nodes, "pg2"); a != "pg2" || b != "pg1" {
		t.Errorf("synchronous_standby_names %q on pg1 and %q on pg2, want pg2 and pg1 (the other server)", a, b)
	}
	script := pgServerScript([]string{"/bin/postgres", "/bin/initdb", "/bin/pg_basebackup"}, "5433", "pg2")
	for _, want := range []string{`-d "$(cat upstream)" -D data -R -X stream`, "cp -a template data", "-c hot_standby=on", `"primary_conninfo=$(cat upstream)"`, "-p 5433", "synchronous_standby_names=pg2"} {
		if !strings.Contains(script, want) {
			t.Errorf("replica script %q lacks %q", script, want)
		}
	}
}
