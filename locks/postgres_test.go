package locks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/systems"
)

// postgresSystem starts the postgres system in a directory its server's user can reach, or skips
// saying what to install.
func postgresSystem(t *testing.T) systems.System {
	t.Helper()
	if _, err := systems.FindPostgres(""); err != nil {
		t.Skipf("postgres tests skipped: %v", err)
	}
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sys, err := systems.Start(context.Background(), "postgres", systems.Config{Dir: dir, Groups: []string{"c1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	return sys
}

// Both advisory locks refuse a held key and grant it after the release; terminating the holder's
// backend frees the lock under the holder, which hears of it only when it releases.
func TestPostgresAdvisoryLocksEndWithTheirSession(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	sys := postgresSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, name := range []string{"pg-advisory", "pg-advisory-xact"} {
		t.Run(name, func(t *testing.T) {
			a, b := openOn(t, sys, name, Options{}), openOn(t, sys, name, Options{})
			la, err := a.Acquire(ctx, "k-"+name, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Acquire(ctx, "k-"+name, 2*time.Second); !IsHeld(err) {
				t.Fatalf("a held key: %v, want held", err)
			}
			if err := a.Release(ctx, la); err != nil {
				t.Fatal(err)
			}
			lb, err := b.Acquire(ctx, "k-"+name, 2*time.Second)
			if err != nil {
				t.Fatalf("after the release: %v", err)
			}
			ended, err := sys.(systems.SessionEnder).EndSessions(ctx, "pg1")
			if err != nil || len(ended) != 1 {
				t.Fatalf("ended %v, %v: want the holder's one backend", ended, err)
			}
			var la2 *Lease
			for la2 == nil && ctx.Err() == nil {
				la2, err = a.Acquire(ctx, "k-"+name, 2*time.Second)
				if err != nil && !IsHeld(err) {
					t.Fatal(err)
				}
			}
			if la2 == nil {
				t.Fatal("the key was never granted after its holder's session ended")
			}
			if err := b.Release(ctx, lb); err == nil {
				t.Fatal("the release of a lock whose session ended succeeded")
			}
		})
	}
}

// pg-lease refuses a live lease, grants an expired one with a higher token, refuses the release of
// a superseded lease, and outlives the sessions of its clients.
func TestPostgresLeaseTokensAndExpiry(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	sys := postgresSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := openOn(t, sys, "pg-lease", Options{}), openOn(t, sys, "pg-lease", Options{})
	la, err := a.Acquire(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sys.(systems.SessionEnder).EndSessions(ctx, "pg1"); err != nil {
		t.Fatal(err)
	}
	var held error
	for range 3 { // the first try may find its connection ended
		if _, held = b.Acquire(ctx, "k", time.Second); IsHeld(held) {
			break
		}
	}
	if !IsHeld(held) {
		t.Fatalf("a live lease after its sessions ended: %v, want held", held)
	}
	time.Sleep(time.Until(la.Deadline) + 100*time.Millisecond)
	lb, err := b.Acquire(ctx, "k", time.Second)
	if err != nil {
		t.Fatalf("an expired lease: %v", err)
	}
	if lb.Token <= la.Token {
		t.Fatalf("token %d after %d: want higher", lb.Token, la.Token)
	}
	if err := a.Release(ctx, la); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("release of a superseded lease: %v, want lease lost", err)
	}
	if err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
}

// Through PgBouncer in transaction pooling a second client is granted a held session lock (its try
// runs on the holder's server session, where the lock is reentrant); in session pooling it is refused.
func TestPostgresAdvisoryThroughPgBouncer(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	sys := postgresSystem(t)
	if len(sys.Nodes()) < 3 {
		t.Skip("pgbouncer tests skipped: pgbouncer not installed (scripts/install-deps.sh)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := openOn(t, sys, "pg-advisory-pgbouncer-session", Options{}), openOn(t, sys, "pg-advisory-pgbouncer-session", Options{})
	if _, err := a.Acquire(ctx, "k", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, "k", 2*time.Second); !IsHeld(err) {
		t.Fatalf("session pooling: a held key: %v, want held", err)
	}
	// Transaction pooling, three server sessions: some of a few tries land on the holder's.
	c := openOn(t, sys, "pg-advisory-pgbouncer", Options{})
	if _, err := c.Acquire(ctx, "t", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	granted := 0
	for range 10 {
		d := openOn(t, sys, "pg-advisory-pgbouncer", Options{})
		if _, err := d.Acquire(ctx, "t", 2*time.Second); err == nil {
			granted++
		} else if !IsHeld(err) {
			t.Fatal(err)
		}
	}
	if granted == 0 {
		t.Fatal("transaction pooling: no try of 10 was granted the held key")
	}
}

// The holder's connection made half-open (packets dropped, no FIN or RST) loses its session lock
// to the server's keepalive, about 4 s later, with nothing said to the holder; after the heal, the
// holder's release fails. Needs root (iptables).
func TestPostgresHalfOpenSessionLosesItsLock(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	if os.Geteuid() != 0 {
		t.Skip("dropping a connection's packets needs root (iptables)")
	}
	sys := postgresSystem(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b := openOn(t, sys, "pg-advisory", Options{}), openOn(t, sys, "pg-advisory", Options{})
	la, err := a.Acquire(ctx, "k", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pids, heal, err := sys.(systems.SessionEnder).BlackholeSessions(ctx, "pg1")
	if err != nil || len(pids) != 1 {
		t.Fatalf("cut %v, %v: want the holder's one backend", pids, err)
	}
	defer heal(context.WithoutCancel(ctx))
	start := time.Now()
	var lb *Lease
	for lb == nil && time.Since(start) < 20*time.Second {
		if lb, err = b.Acquire(ctx, "k", 2*time.Second); err != nil && !IsHeld(err) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lb == nil {
		t.Fatal("the key was never granted in 20 s after its holder's connection went half-open")
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("granted %v after the cut: sooner than the server's keepalive can end a session", took)
	}
	if err := heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, la); err == nil {
		t.Fatal("the release of a lock whose session the keepalive ended succeeded")
	}
}
