package systems

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func startShimmed(t *testing.T, nodes int) *Local {
	t.Helper()
	shim, err := BuildClockShim(context.Background(), t.TempDir())
	if errors.Is(err, ErrNoCompiler) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := StartLocal(context.Background(), LocalConfig{Nodes: nodes, Dir: t.TempDir(), ClockShim: shim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func near(got, want, tol time.Duration) bool { return got > want-tol && got < want+tol }

func TestClockShimShiftsRedisTime(t *testing.T) {
	c := startShimmed(t, 1)
	ctx := context.Background()
	n := c.Nodes()[0]
	rc := client(t, n)
	// The shimmed node starts and serves normally.
	if err := rc.Set(ctx, "plain", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	off, err := c.ClockOffset(n.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !near(off, 0, 5*time.Millisecond) {
		t.Fatalf("unshifted node measured %v off", off)
	}

	if err := rc.Set(ctx, "short", "v", 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetClockOffset(n.Name, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if off, err = c.ClockOffset(n.Name); err != nil || !near(off, 10*time.Second, 5*time.Millisecond) {
		t.Fatalf("after +10s measured %v (%v)", off, err)
	}
	// Redis expires by wall clock: the 5 s key is gone at once.
	if err := rc.Get(ctx, "short").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("key with 5s TTL survived a +10s jump: %v", err)
	}

	if err := c.SetClockOffset(n.Name, -10*time.Second); err != nil {
		t.Fatal(err)
	}
	if off, err = c.ClockOffset(n.Name); err != nil || !near(off, -10*time.Second, 5*time.Millisecond) {
		t.Fatalf("after -10s measured %v (%v)", off, err)
	}
	if err := rc.Set(ctx, "long", "v", 300*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetClockOffset(n.Name, -11*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	// The clock went back another second: the key outlives its 300 ms TTL.
	if err := rc.Get(ctx, "long").Err(); err != nil {
		t.Fatalf("key did not outlive its TTL after the clock went back: %v", err)
	}

	// A restarted node keeps its wrong clock.
	if err := c.Kill(n.Name); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, n.Name); err != nil {
		t.Fatal(err)
	}
	if off, err = c.ClockOffset(n.Name); err != nil || !near(off, -11*time.Second, 5*time.Millisecond) {
		t.Fatalf("after a restart measured %v (%v), want -11s", off, err)
	}
	if err := c.SetClockOffset(n.Name, 0); err != nil {
		t.Fatal(err)
	}
	if off, err = c.ClockOffset(n.Name); err != nil || !near(off, 0, 5*time.Millisecond) {
		t.Fatalf("after reset measured %v (%v)", off, err)
	}
}

func TestClockOffsetNeedsShim(t *testing.T) {
	c := startCluster(t, 1, PersistNone)
	if err := c.SetClockOffset("n1", time.Second); err == nil {
		t.Fatal("moved the clock of a node without the shim")
	}
}

func TestClockShimWithoutACompilerNamesTheFix(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CC", "")
	_, err := BuildClockShim(context.Background(), t.TempDir())
	if !errors.Is(err, ErrNoCompiler) || !strings.Contains(err.Error(), "apt-get install gcc") {
		t.Fatalf("got %v, want an error naming apt-get install gcc", err)
	}
}
