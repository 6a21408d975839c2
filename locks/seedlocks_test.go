package locks

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// The watchdog keeps a lease alive past its lease time while the holder holds, lets the owner in
// again (reentrancy), and frees the lock only at the outermost release.
func TestWatchdogRenewsAndReenters(t *testing.T) {
	_, eps, admins := cluster(t, 1)
	// A 1 s lease renewed every third of it: at load 50 a 300 ms lease lapsed between two renewals
	// that a loaded machine ran late (issue 28).
	w, err := New("watchdog", eps, Options{NodeTimeout: time.Second, WatchdogTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var mu sync.Mutex
	renewals := 0
	w.(Notifier).Notify(func(LeaseEvent) { mu.Lock(); renewals++; mu.Unlock() })
	ctx := context.Background()
	l, err := w.Acquire(ctx, "k", time.Second)
	if err != nil || !l.Deadline.IsZero() || l.Depth != 1 {
		t.Fatalf("acquire: %+v, %v: want a lease with no deadline at depth 1", l, err)
	}
	time.Sleep(2200 * time.Millisecond) // more than twice the lease time
	if n, _ := admins[0].Exists(ctx, "k").Result(); n != 1 {
		t.Fatal("the watchdog let the lock expire while its holder held it")
	}
	inner, err := w.Acquire(ctx, "k", time.Second)
	if err != nil || inner.Depth != 2 {
		t.Fatalf("re-entry: %+v, %v: want depth 2", inner, err)
	}
	other := open(t, "watchdog", eps)
	if _, err := other.Acquire(ctx, "k", 200*time.Millisecond); !IsHeld(err) {
		t.Fatalf("another client acquired a held watchdog lock: %v", err)
	}
	if err := w.Release(ctx, inner); err != nil {
		t.Fatal(err)
	}
	if n, _ := admins[0].Exists(ctx, "k").Result(); n != 1 {
		t.Fatal("the inner release freed the lock")
	}
	if err := w.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(ctx, "k", 200*time.Millisecond); err != nil {
		t.Fatalf("after the outermost release the lock is still taken: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if renewals < 2 {
		t.Fatalf("%d renewals reported in 2.2s of a 1s lease", renewals)
	}
}

// A paused watchdog renews nothing (the lock lapses, as under SIGSTOP); a crashed one never renews
// again and releases nothing.
func TestWatchdogPauseAndCrash(t *testing.T) {
	_, eps, admins := cluster(t, 1)
	w, err := New("r2m", eps, Options{NodeTimeout: 100 * time.Millisecond, WatchdogTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	if _, err := w.Acquire(ctx, "k", time.Second); err != nil {
		t.Fatal(err)
	}
	w.(Pausable).Pause()
	time.Sleep(450 * time.Millisecond)
	if n, _ := admins[0].Exists(ctx, "k").Result(); n != 0 {
		t.Fatal("a paused watchdog kept the lock alive")
	}
	w.(Pausable).Resume()
	if _, err := w.Acquire(ctx, "k2", time.Second); err != nil {
		t.Fatal(err)
	}
	w.(Crashable).Crash()
	time.Sleep(450 * time.Millisecond)
	if n, _ := admins[0].Exists(ctx, "k2").Result(); n != 0 {
		t.Fatal("a crashed client's watchdog kept renewing")
	}
}

// setnx-del dies between SETNX and EXPIRE at its crash point, leaving a key with no expiry.
func TestSetnxDelCrashLeavesAKeyForever(t *testing.T) {
	_, eps, admins := cluster(t, 1)
	crash := errors.New("killed")
	l, err := New("setnx-del", eps, Options{NodeTimeout: 100 * time.Millisecond, Crash: func(p CrashPoint) error {
		if p == CrashAfterSetNX {
			return crash
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if _, err := l.Acquire(ctx, "k", time.Second); !errors.Is(err, crash) {
		t.Fatalf("acquire: %v, want the crash", err)
	}
	if ttl, _ := admins[0].PTTL(ctx, "k").Result(); ttl != -1 {
		t.Fatalf("key TTL %v after a crash between SETNX and EXPIRE: want none (-1)", ttl)
	}
}

// seed 002's lock trusts client clocks: a client whose clock runs ahead by more than the timeout
// takes a held lock over with GETSET; one on time does not.
func TestSetnxGetsetTrustsClientClocks(t *testing.T) {
	_, eps, _ := cluster(t, 1)
	ahead := func() time.Time { return time.Now().Add(5 * time.Second) }
	holder := open(t, "setnx-getset", eps)
	onTime := open(t, "setnx-getset", eps)
	skewed, err := New("setnx-getset", eps, Options{NodeTimeout: time.Second, Clock: ahead})
	if err != nil {
		t.Fatal(err)
	}
	defer skewed.Close()
	ctx := context.Background()
	if _, err := holder.Acquire(ctx, "k", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := onTime.Acquire(ctx, "k", 2*time.Second); !IsHeld(err) {
		t.Fatalf("a client on time took a held lock: %v", err)
	}
	if _, err := skewed.Acquire(ctx, "k", 2*time.Second); err != nil {
		t.Fatalf("a client 5s ahead should take the lock over (the seed's flaw): %v", err)
	}
}
