package locks

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/systems"
)

func cluster(t *testing.T, n int) (*systems.Local, []Endpoint, []*redis.Client) {
	t.Helper()
	c, err := systems.StartLocal(context.Background(), systems.LocalConfig{Nodes: n, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var eps []Endpoint
	var admins []*redis.Client
	for _, node := range c.Nodes() {
		eps = append(eps, Endpoint{Node: node.Name, Addr: node.Addr()})
		rc := node.Admin()
		t.Cleanup(func() { rc.Close() })
		admins = append(admins, rc)
	}
	return c, eps, admins
}

// open's node timeout is far above a request's time on a loaded machine (at load 20, EXPIRE after
// SETNX took over 100 ms): these tests judge what a lock does, not how fast a node answers; the test
// of the node timeout itself sets its own (issue 28).
func open(t *testing.T, name string, eps []Endpoint) Locker {
	t.Helper()
	return openWith(t, name, eps, Options{NodeTimeout: time.Second})
}

func TestMutualExclusion(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	for _, name := range leaseLocks(func(Kind) bool { return true }) {
		t.Run(name, func(t *testing.T) {
			_, eps, _ := cluster(t, 5)
			ctx := context.Background()
			a, b := open(t, name, eps), open(t, name, eps)
			la, err := a.Acquire(ctx, "k", 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Acquire(ctx, "k", 2*time.Second); !errors.Is(err, ErrNotAcquired) || !IsHeld(err) || IsIndeterminate(err) {
				t.Fatalf("second acquire: want a definite ErrHeld, got %v", err)
			}
			if err := a.Release(ctx, la); err != nil {
				t.Fatal(err)
			}
			if err := a.Release(ctx, la); !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("second release: want ErrLeaseLost, got %v", err)
			}
			lb, err := b.Acquire(ctx, "k", 2*time.Second)
			if err != nil {
				t.Fatalf("acquire after release: %v", err)
			}
			if lb.Value == la.Value {
				t.Fatal("two leases share a value")
			}
		})
	}
}

// The validity never promises more than the TTL minus the drift allowance, counted from the send.
func TestValidityAccountsForElapsedAndDrift(t *testing.T) {
	for _, name := range leaseLocks(func(k Kind) bool { return !k.Open && k.Name != "setnx-getset" && k.Library == "" }) {
		t.Run(name, func(t *testing.T) {
			_, eps, _ := cluster(t, 5)
			l := open(t, name, eps)
			ttl := time.Second
			before := time.Now()
			lease, err := l.Acquire(context.Background(), "k", ttl)
			if err != nil {
				t.Fatal(err)
			}
			after := time.Now()
			if lease.Start.Before(before) || lease.Start.After(after) {
				t.Fatalf("lease start %v lies outside the acquire call", lease.Start)
			}
			if want := lease.Start.Add(ttl - ttl/100 - 2*time.Millisecond); lease.Deadline.After(want) {
				t.Fatalf("deadline %v beyond TTL minus drift from the send (%v)", lease.Deadline.Sub(lease.Start), want.Sub(lease.Start))
			}
			if lease.Validity > ttl || lease.Validity <= 0 || lease.Deadline.Sub(after) > lease.Validity {
				t.Fatalf("bad validity %v", lease.Validity)
			}
		})
	}
}

func TestExpiryLetsTheNextClientIn(t *testing.T) {
	for _, name := range leaseLocks(func(k Kind) bool { return !k.Open && k.Name != "setnx-del" && !k.WholeSeconds }) {
		t.Run(name, func(t *testing.T) {
			_, eps, _ := cluster(t, 5)
			ctx := context.Background()
			a, b := open(t, name, eps), open(t, name, eps)
			la, err := a.Acquire(ctx, "k", 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			// The nodes set the key's expiry before they answered: 220 ms after the answer it is
			// gone, however late a loaded machine delivered the request (issue 28).
			time.Sleep(220 * time.Millisecond)
			if _, err := b.Acquire(ctx, "k", time.Second); err != nil {
				t.Fatalf("acquire after expiry: %v", err)
			}
			if err := a.Release(ctx, la); !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("release of an expired lease: want ErrLeaseLost, got %v", err)
			}
		})
	}
}

func TestExtend(t *testing.T) {
	for _, name := range leaseLocks(func(k Kind) bool { return !k.NoExtend }) {
		t.Run(name, func(t *testing.T) {
			_, eps, admins := cluster(t, 5)
			ctx := context.Background()
			l := open(t, name, eps)
			// Whole seconds, which every lock takes, and far above the time a loaded machine needs
			// to acquire and extend (issue 28).
			ttl := 2 * time.Second
			lease, err := l.Acquire(ctx, "k", ttl)
			if err != nil {
				t.Fatal(err)
			}
			ext, err := l.Extend(ctx, lease, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if !ext.Deadline.After(lease.Deadline.Add(time.Second)) {
				t.Fatalf("extension did not move the deadline: %v -> %v", lease.Deadline, ext.Deadline)
			}
			if pttl := admins[0].PTTL(ctx, "k").Val(); pttl < 4*time.Second {
				t.Fatalf("key TTL after extend is %v", pttl)
			}
			other := open(t, name, eps)
			if _, err := other.Extend(ctx, &Lease{Key: "k", Value: "not-mine"}, time.Second); !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("extending someone else's lease: want ErrLeaseLost, got %v", err)
			}
		})
	}
}

func TestRedlockQuorum(t *testing.T) {
	c, eps, admins := cluster(t, 5)
	ctx := context.Background()
	l := open(t, "redlock", eps)

	// Two nodes down: a majority is left and the lock is granted by exactly those three.
	c.Kill("n1")
	c.Kill("n2")
	lease, err := l.Acquire(ctx, "k", 2*time.Second)
	if err != nil {
		t.Fatalf("acquire with 3 of 5 up: %v", err)
	}
	if len(lease.Nodes) != 3 {
		t.Fatalf("granted by %v, want the three live nodes", lease.Nodes)
	}
	if err := l.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}

	// Three nodes down: no quorum. A refused connection certainly carried no request, so the
	// failure is definite, and it is an error, not contention.
	c.Kill("n3")
	_, err = l.Acquire(ctx, "k", 2*time.Second)
	if !errors.Is(err, ErrNotAcquired) || IsIndeterminate(err) || IsHeld(err) {
		t.Fatalf("acquire with 2 of 5 up: want a definite ErrNotAcquired that is not ErrHeld, got %v", err)
	}
	// The failed acquire cleaned up after itself on the nodes that granted it.
	for _, i := range []int{3, 4} {
		if err := admins[i].Get(ctx, "k").Err(); err != redis.Nil {
			t.Fatalf("node n%d still holds the failed acquire's key: %v", i+1, err)
		}
	}
}

func TestRedlockNoQuorumAgainstAnotherHolderIsDefinite(t *testing.T) {
	c, eps, admins := cluster(t, 5)
	ctx := context.Background()
	// Another client holds three nodes.
	for i := range 3 {
		admins[i].Set(ctx, "k", "other", 10*time.Second)
	}
	l := open(t, "redlock", eps)
	_, err := l.Acquire(ctx, "k", 2*time.Second)
	if !IsHeld(err) || IsIndeterminate(err) {
		t.Fatalf("want a definite ErrHeld, got %v", err)
	}
	for _, i := range []int{3, 4} {
		if err := admins[i].Get(ctx, "k").Err(); err != redis.Nil {
			t.Fatalf("node n%d kept the failed acquire's key", i+1)
		}
	}
	for i := range 3 {
		if v := admins[i].Get(ctx, "k").Val(); v != "other" {
			t.Fatalf("failed acquire touched the other holder's key on n%d: %q", i+1, v)
		}
	}
	// With n4 down the outcome is still certain: even had n4 granted, two of five is no quorum.
	c.Kill("n4")
	if _, err := l.Acquire(ctx, "k", 2*time.Second); !IsHeld(err) || IsIndeterminate(err) {
		t.Fatalf("with a node down: want a definite ErrHeld, got %v", err)
	}
}

// A client that reaches only a minority, all of it taken, is refused for being cut off, not for
// contention: the taken nodes alone do not deny a quorum.
func TestRedlockCutOffFromAMajorityIsAnError(t *testing.T) {
	c, eps, admins := cluster(t, 5)
	ctx := context.Background()
	admins[0].Set(ctx, "k", "other", 10*time.Second)
	admins[1].Set(ctx, "k", "other", 10*time.Second)
	for _, n := range []string{"n3", "n4", "n5"} {
		c.Kill(n)
	}
	_, err := open(t, "redlock", eps).Acquire(ctx, "k", 2*time.Second)
	if !errors.Is(err, ErrNotAcquired) || IsHeld(err) || IsIndeterminate(err) {
		t.Fatalf("want a definite ErrNotAcquired that is not ErrHeld, got %v", err)
	}
}

// A dead node refuses the connection: the request never left, so the failure is definite, and
// an error rather than contention.
func TestSingleOnADeadNodeIsADefiniteError(t *testing.T) {
	for _, name := range []string{"single", "fenced"} {
		t.Run(name, func(t *testing.T) {
			c, eps, _ := cluster(t, 1)
			l := open(t, name, eps)
			c.Kill("n1")
			_, err := l.Acquire(context.Background(), "k", time.Second)
			if !errors.Is(err, ErrNotAcquired) || IsHeld(err) || IsIndeterminate(err) {
				t.Fatalf("want a definite ErrNotAcquired that is not ErrHeld, got %v", err)
			}
		})
	}
}

// A node that accepts the connection and never answers (stopped) leaves the outcome unknown.
func TestSingleOnAStoppedNodeIsIndeterminate(t *testing.T) {
	c, eps, _ := cluster(t, 1)
	l := open(t, "single", eps)
	if err := c.Signal("n1", syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer c.Signal("n1", syscall.SIGCONT)
	if _, err := l.Acquire(context.Background(), "k", time.Second); !IsIndeterminate(err) {
		t.Fatalf("want indeterminate, got %v", err)
	}
}

func TestUnknownLock(t *testing.T) {
	if _, err := New("zookeeper", []Endpoint{{Node: "n1", Addr: "x"}}, Options{}); err == nil {
		t.Fatal("want an error for an unknown lock")
	}
	if err := Validate("single"); err != nil {
		t.Fatal(err)
	}
	if err := Validate("nope"); err == nil {
		t.Fatal("Validate accepted an unknown lock")
	}
}

// leaseLocks are the locks on redis-masters that keep the promise a test checks: the watchdog locks
// promise no deadline (their leases live while held), seed 002's lock keeps no drift allowance, the
// naive lock's release deletes whatever holds the key, and some locks cannot extend.
// leaseLocks lists the Go locks on redis-masters that keep: client programs have tests of their own
// (external_test.go), whose TTLs they can keep (whole seconds for some libraries).
func leaseLocks(keep func(Kind) bool) []string {
	var out []string
	for _, n := range namesOn("redis-masters") {
		if k, _ := Lookup(n); !k.Program && k.Breaks == "" && keep(k) {
			out = append(out, n)
		}
	}
	return out
}
