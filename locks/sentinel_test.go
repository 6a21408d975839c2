package locks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/links"
	"github.com/lockpick-dev/lockpick/systems"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// TestMain silences go-redis's own log: refused dials after kills are expected.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

// namesOn lists the locks that run on the named system.
func namesOn(system string) []string {
	var out []string
	for _, n := range Names() {
		if needs, _ := NeedsOf(n); needs.System == system {
			out = append(out, n)
		}
	}
	return out
}

func TestEveryLockNamesItsSystem(t *testing.T) {
	for _, n := range Names() {
		needs, err := NeedsOf(n)
		if err != nil || systems.Validate(needs.System) != nil {
			t.Errorf("lock %s: needs %+v, %v", n, needs, err)
		}
	}
	if _, err := NeedsOf("nope"); err == nil {
		t.Error("NeedsOf accepted an unknown lock")
	}
}

func sentinelSystem(t *testing.T) systems.System {
	t.Helper()
	sys, err := systems.Start(context.Background(), "redis-sentinel", systems.Config{Dir: t.TempDir(), Groups: []string{"c1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	return sys
}

func openOn(t *testing.T, sys systems.System, name string, o Options) Locker {
	t.Helper()
	eps, err := sys.Endpoints("c1")
	if err != nil {
		t.Fatal(err)
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = 500 * time.Millisecond
	}
	return openWith(t, name, eps, o)
}

func nodeAdmin(t *testing.T, sys systems.System, name string) *redis.Client {
	t.Helper()
	for _, n := range sys.Nodes() {
		if n.Name == name {
			rc := systems.AdminClient(n.Addr)
			t.Cleanup(func() { rc.Close() })
			return rc
		}
	}
	t.Fatalf("no node %s", name)
	return nil
}

func waitFor(t *testing.T, wait time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", wait, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Both Sentinel locks exclude, promise TTL less drift from the send, name the master that granted,
// and a probe sees the lease on the primary and, once replicated, on the replicas.
func TestSentinelLocksExcludeAndPromise(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	sys := sentinelSystem(t)
	ctx := context.Background()
	for i, name := range namesOn("redis-sentinel") {
		probe, err := NewProbe(name, sys.Nodes()) // each lock's own: a watchdog lease is a hash
		if err != nil {
			t.Fatal(err)
		}
		defer probe.Close()
		key := fmt.Sprintf("k%d", i)
		// sentinel-wait's WAIT gets 1 s, not a tenth of the TTL: at load 50 a replica took longer
		// than 200 ms to acknowledge (issue 28).
		o := Options{WaitTimeout: time.Second}
		a, b := openOn(t, sys, name, o), openOn(t, sys, name, o)
		before := time.Now()
		la, err := a.Acquire(ctx, key, 2*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := la.Start.Add(2*time.Second - 20*time.Millisecond - 2*time.Millisecond); la.Deadline.After(want) || la.Start.Before(before) {
			t.Fatalf("%s: deadline %v beyond TTL minus drift from the send", name, la.Deadline.Sub(la.Start))
		}
		if !slices.Equal(la.Nodes, []string{"n1"}) {
			t.Fatalf("%s: granted by %v, want n1", name, la.Nodes)
		}
		if (la.Token > 0) != GivesTokens(name) {
			t.Fatalf("%s: token %d, gives tokens: %v", name, la.Token, GivesTokens(name))
		}
		if _, err := b.Acquire(ctx, key, 2*time.Second); !IsHeld(err) || IsIndeterminate(err) {
			t.Fatalf("%s: second acquire: want ErrHeld (contention), got %v", name, err)
		}
		waitFor(t, 5*time.Second, func() error {
			leases := probe.Leases(ctx, []string{key})
			if len(leases) != 1 || leases[0].Value != la.Value || !slices.Equal(leases[0].Nodes, []string{"n1", "n2", "n3"}) {
				return fmt.Errorf("%s: probe sees %+v", name, leases)
			}
			return nil
		})
		if err := a.Release(ctx, la); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lb, err := b.Acquire(ctx, key, 2*time.Second)
		if err != nil {
			t.Fatalf("%s: acquire after release: %v", name, err)
		}
		if GivesTokens(name) && lb.Token <= la.Token {
			t.Fatalf("%s: token %d after %d: tokens must increase", name, lb.Token, la.Token)
		}
	}
}

// sentinel-wait refuses a lock the replicas did not acknowledge, and gives the key back; the plain
// sentinel lock grants it all the same.
func TestSentinelWaitFailsWhenReplicationStalls(t *testing.T) {
	sys := sentinelSystem(t)
	for _, r := range []string{"n2", "n3"} {
		l, err := sys.Links().Get(r, "n1")
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range links.Stall("stall") {
			if err := l.AddToxic(tx); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	w := openOn(t, sys, "sentinel-wait", Options{WaitTimeout: 100 * time.Millisecond})
	_, err := w.Acquire(ctx, "k", 2*time.Second)
	if !errors.Is(err, ErrNotAcquired) || IsIndeterminate(err) || IsHeld(err) {
		t.Fatalf("sentinel-wait with replication stalled: want a definite ErrNotAcquired, got %v", err)
	}
	if err := nodeAdmin(t, sys, "n1").Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("the refused lock's key stayed on the primary: %v", err)
	}
	s := openOn(t, sys, "sentinel", Options{})
	if _, err := s.Acquire(ctx, "k", 2*time.Second); err != nil {
		t.Fatalf("the plain sentinel lock with replication stalled: %v", err)
	}
}

// After the primary is killed and a replica promoted, the lock finds the new master through the
// sentinels, over its links, and names it on the lease.
func TestSentinelLockFollowsAFailover(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	sys := sentinelSystem(t)
	l := openOn(t, sys, "sentinel", Options{})
	ctx := context.Background()
	if _, err := l.Acquire(ctx, "before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := sys.Backend().Kill("n1"); err != nil {
		t.Fatal(err)
	}
	var lease *Lease
	waitFor(t, 30*time.Second, func() error {
		var err error
		lease, err = l.Acquire(ctx, "after", 5*time.Second)
		return err
	})
	// The system's view follows the sentinels by polling them, a moment after the lock did.
	waitFor(t, 5*time.Second, func() error {
		primary := systems.WithRole(sys.Roles(), systems.RolePrimary)
		if len(primary) != 1 || primary[0] == "n1" || !slices.Equal(lease.Nodes, primary) {
			return fmt.Errorf("lease granted by %v, the system's primary is %v", lease.Nodes, primary)
		}
		return nil
	})
}

// With min-replicas-to-write the primary refuses the lock once its replicas fall silent: a definite
// failure, where the plain configuration grants a lease no replica will have.
func TestMinReplicasToWriteRefusesAnUnreplicatedLock(t *testing.T) {
	sys, err := systems.Start(context.Background(), "redis-sentinel", systems.Config{Dir: t.TempDir(), Groups: []string{"c1"},
		Sentinel: systems.SentinelConfig{MinReplicasToWrite: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	ctx := context.Background()
	l := openOn(t, sys, "sentinel", Options{})
	if _, err := l.Acquire(ctx, "k", time.Second); err != nil {
		t.Fatalf("with the replicas in sync: %v", err)
	}
	for _, r := range []string{"n2", "n3"} {
		link, _ := sys.Links().Get(r, "n1")
		for _, tx := range links.Stall("stall") {
			if err := link.AddToxic(tx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The replicas' acknowledgements stop; past the 1 s lag the primary refuses writes.
	tries := 0
	waitFor(t, 10*time.Second, func() error {
		tries++
		_, err := l.Acquire(ctx, fmt.Sprintf("fresh-%d", tries), time.Second)
		if err == nil {
			return errors.New("granted with no replica acknowledging")
		}
		if !errors.Is(err, ErrNotAcquired) || IsIndeterminate(err) || !strings.Contains(err.Error(), "NOREPLICAS") {
			t.Fatalf("want a definite NOREPLICAS refusal, got %v", err)
		}
		return nil
	})
}
