package systems

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgTestDir is a temporary directory the postgres user can reach: t.TempDir and its parent are
// private to the harness's user.
func pgTestDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startPostgres starts the postgres system, or skips saying what to install.
func startPostgres(t *testing.T) System {
	t.Helper()
	if _, err := FindPostgres(""); err != nil {
		t.Skipf("postgres tests skipped: %v", err)
	}
	sys, err := Start(context.Background(), "postgres", Config{Dir: pgTestDir(t), Groups: []string{"c1"},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	return sys
}

func TestPostgresKillRestartWipePause(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	sys := startPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addr := sys.Nodes()[0].Addr
	exec := func(sql string) error {
		c, err := PostgresAdmin(ctx, addr)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, sql)
		return err
	}
	eps, err := sys.Endpoints("c1")
	if err != nil || eps[0].Node != pgNode || eps[0].Addr == addr {
		t.Fatalf("endpoints %v, %v: want the primary first, through a link", eps, err)
	}
	for _, ep := range eps { // the primary, and the poolers when pgbouncer is installed
		if err := pgAnswers(ctx, ep.Addr); err != nil {
			t.Fatalf("%s through its link: %v", ep.Node, err)
		}
	}
	if err := exec("CREATE TABLE kept (x int)"); err != nil {
		t.Fatal(err)
	}
	b := sys.Backend()
	if err := b.Kill(pgNode); err != nil {
		t.Fatal(err)
	}
	if err := sys.Ping(ctx, pgNode); err == nil {
		t.Fatal("a killed postgres answers")
	}
	if err := b.Start(ctx, pgNode); err != nil {
		t.Fatal(err)
	}
	if err := exec("SELECT * FROM kept"); err != nil {
		t.Fatalf("a restart with data lost the table: %v", err)
	}
	b.Kill(pgNode)
	if err := b.StartEmpty(ctx, pgNode); err != nil {
		t.Fatal(err)
	}
	if err := exec("SELECT * FROM kept"); err == nil {
		t.Fatal("a restart without data kept the table")
	}
	// A pause stops the postmaster and every backend: an open session's query waits.
	c, err := PostgresAdmin(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := b.Signal(pgNode, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	qctx, qcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = c.Exec(qctx, "SELECT 1")
	qcancel()
	b.Signal(pgNode, syscall.SIGCONT)
	if err == nil {
		t.Fatal("a paused postgres answered on an open session")
	}
	if err := sys.Ping(ctx, pgNode); err != nil {
		t.Fatalf("after continue: %v", err)
	}
}

// TestPostgresClockShimMovesNow: the lease table's expiry is the server's now(), so a clock fault on
// the postgres node must move now() in every backend: one forked before the jump (a client's open
// session) as well as one forked after it.
func TestPostgresClockShimMovesNow(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	if _, err := FindPostgres(""); err != nil {
		t.Skipf("postgres tests skipped: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	shim, err := BuildClockShim(ctx, t.TempDir())
	if err != nil {
		t.Skip(err)
	}
	sys, err := Start(ctx, "postgres", Config{Dir: pgTestDir(t), Groups: []string{"c1"}, ClockShim: shim,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	addr := sys.Nodes()[0].Addr
	before, err := PostgresAdmin(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close(ctx)
	const jump = time.Hour
	if err := sys.Backend().SetClockOffset(pgNode, jump); err != nil {
		t.Fatal(err)
	}
	after, err := PostgresAdmin(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close(ctx)
	for name, c := range map[string]interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}{"a backend forked before the jump": before, "a backend forked after it": after} {
		var now time.Time
		if err := c.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
			t.Fatal(err)
		}
		if ahead := time.Until(now); ahead < jump-time.Minute || ahead > jump+time.Minute {
			t.Errorf("%s: now() is %v ahead of the harness's clock, want about %v", name, ahead.Round(time.Second), jump)
		}
	}
}
