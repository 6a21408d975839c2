package locks

import (
	"context"
	"errors"
	"testing"
	"time"
)

// buildPair builds two processes' clients of lock name over one fresh node.
func buildPair(t *testing.T, name string) (Locker, Locker) {
	t.Helper()
	k, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	_, eps, _ := cluster(t, k.Nodes)
	dir := t.TempDir()
	opts := func(p int) Options {
		return Options{Process: p, TTL: 2 * time.Second, KeyPrefix: "lockpick:", ClientDir: dir, NodeTimeout: time.Second}
	}
	var ls [2]Locker
	for i := range ls {
		if ls[i], err = Build(k, eps, opts(i+1)); err != nil {
			t.Skipf("%s cannot start here (make deps installs its packages): %v", name, err)
		}
		t.Cleanup(func() { ls[i].Close() })
	}
	return ls[0], ls[1]
}

// The catalogue's locks (docs/bugs.md) reproduce their upstream bug on a real node: a second
// client is granted a key the first still holds, with no fault at all.
func TestBugLocksGrantAHeldKey(t *testing.T) {
	for _, name := range []string{"py-redis-reacquire", "bsm-redislock-token"} {
		t.Run(name, func(t *testing.T) {
			a, b := buildPair(t, name)
			ctx := context.Background()
			la, err := a.Acquire(ctx, "lockpick:0", 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			lb, err := b.Acquire(ctx, "lockpick:0", 2*time.Second)
			if err != nil {
				t.Fatalf("second acquire of a held key: %v; the bug grants it", err)
			}
			if lb.Value == la.Value {
				t.Fatalf("both leases are named %q: the checker could not tell the holders apart", la.Value)
			}
			// The first holder's release fails: the key is gone (redis-py's reacquire deleted it,
			// and the second holder's deleted its own) or holds the second's value (bsm).
			if err := a.Release(ctx, la); !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("first holder's release: %v, want lease lost", err)
			}
		})
	}
}

// The libraries' correct configurations refuse the same second acquire: the bug is the variant's.
func TestBugLocksControls(t *testing.T) {
	for _, name := range []string{"py-redis", "bsm-redislock"} {
		t.Run(name, func(t *testing.T) {
			a, b := buildPair(t, name)
			ctx := context.Background()
			if _, err := a.Acquire(ctx, "lockpick:0", 2*time.Second); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Acquire(ctx, "lockpick:0", 2*time.Second); !IsHeld(err) {
				t.Fatalf("second acquire of a held key: %v, want held", err)
			}
		})
	}
}

// go-zero#4319: the holder's nested Acquire of its own RedisLock answers true, the nested section's
// Release deletes the key, and a second client is granted it while the outer section still holds.
func TestGoZeroNestedReleaseFreesTheOuterHold(t *testing.T) {
	a, b := buildPair(t, "go-zero-nested")
	ctx := context.Background()
	outer, err := a.Acquire(ctx, "lockpick:0", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, "lockpick:0", 2*time.Second); !IsHeld(err) {
		t.Fatalf("another client's acquire of a held key: %v, want held", err)
	}
	inner, err := a.Acquire(ctx, "lockpick:0", 2*time.Second)
	if err != nil {
		t.Fatalf("nested acquire by the holder: %v; go-zero answers true", err)
	}
	if inner.Depth != 2 || inner.Value != outer.Value {
		t.Fatalf("nested lease depth %d value %q, want depth 2 and the outer's value %q", inner.Depth, inner.Value, outer.Value)
	}
	if err := a.Release(ctx, inner); err != nil {
		t.Fatalf("nested release: %v", err)
	}
	if _, err := b.Acquire(ctx, "lockpick:0", 2*time.Second); err != nil {
		t.Fatalf("second client's acquire after the nested release: %v; the bug grants it under the outer hold", err)
	}
	if err := a.Release(ctx, outer); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("outer release: %v, want lease lost (the key is the second client's)", err)
	}
}

// TestRenewalAfterExpiryTakesAFreedKey: a lease that expired while another client held and released
// the key is renewed by the SET NX renewals (redsync's WithSetNXOnExtend, go-zero's keepalive), and
// refused by plain redsync, on real redis-servers.
func TestRenewalAfterExpiryTakesAFreedKey(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	for _, c := range []struct {
		name  string
		renew bool
	}{{"redsync-setnx-extend", true}, {"go-zero-keepalive", true}, {"redsync", false}} {
		t.Run(c.name, func(t *testing.T) {
			_, eps, _ := cluster(t, 5)
			ctx := context.Background()
			a, b := open(t, c.name, eps), open(t, c.name, eps)
			// Leases of 2 s: a loaded machine takes a good part of a second to reach five nodes, and a
			// lease that ends before it is granted proves nothing here (issue 28).
			lease, err := a.Acquire(ctx, "k", 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(2600 * time.Millisecond) // past the TTL and go-zero's 500 ms tolerance
			other, err := b.Acquire(ctx, "k", 2*time.Second)
			if err != nil {
				t.Fatalf("the expired key was not granted to another client: %v", err)
			}
			if err := b.Release(ctx, other); err != nil {
				t.Fatal(err)
			}
			_, err = a.Extend(ctx, lease, 2*time.Second)
			switch {
			case c.renew && err != nil:
				t.Fatalf("the renewal of the expired lease failed (%v): the SET NX renewal should take the freed key", err)
			case !c.renew && !errors.Is(err, ErrLeaseLost):
				t.Fatalf("the renewal of the expired lease: want ErrLeaseLost, got %v", err)
			}
		})
	}
}
