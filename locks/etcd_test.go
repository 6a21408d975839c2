package locks

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/systems"
)

func etcdSystem(t *testing.T) systems.System {
	t.Helper()
	srv, err := systems.FindEtcd(context.Background(), systems.EtcdSystem, nil)
	if err != nil {
		t.Skipf("etcd tests skipped: %v", err)
	}
	sys, err := systems.Start(context.Background(), "etcd", systems.Config{Dir: t.TempDir(), Groups: []string{"c1"}, Etcd: systems.EtcdConfig{Server: srv.Path}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	return sys
}

// etcd's lock refuses a held key at once; its deadline comes from the keepalives sent and moves
// with each answer; a holder paused past its lease loses it to another client, whose fencing token
// (the key's create revision) is higher, and hears of the loss once it runs again.
func TestEtcdLockHeldRenewedAndLostToAPause(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	sys := etcdSystem(t)
	o := Options{NodeTimeout: 500 * time.Millisecond}
	a, b := openOn(t, sys, "etcd", o), openOn(t, sys, "etcd", o)
	var mu sync.Mutex
	var news []LeaseEvent
	a.(Notifier).Notify(func(e LeaseEvent) {
		mu.Lock()
		news = append(news, e)
		mu.Unlock()
	})
	ctx := context.Background()
	const ttl = 2 * time.Second
	before := time.Now()
	la, err := a.Acquire(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if la.Token <= 0 || la.Deadline.Before(before) || la.Deadline.After(time.Now().Add(ttl)) {
		t.Fatalf("lease %+v: want a token and a deadline within the TTL of the acquire", la)
	}
	if _, err := b.Acquire(ctx, "k", ttl); !IsHeld(err) {
		t.Fatalf("second acquire: %v, want held", err)
	}
	time.Sleep(2 * ttl)
	mu.Lock()
	renewed := len(news) > 0 && !news[len(news)-1].Lost && news[len(news)-1].Deadline.After(la.Deadline.Add(ttl))
	mu.Unlock()
	if !renewed {
		t.Fatalf("after two TTLs of holding: news %+v, want renewals moving the deadline on from %v", news, la.Deadline)
	}

	a.(Pausable).Pause()
	var lb *Lease
	deadline := time.Now().Add(4 * ttl)
	for {
		lb, err = b.Acquire(ctx, "k", ttl)
		if err == nil {
			break
		}
		if !IsHeld(err) || time.Now().After(deadline) {
			t.Fatalf("acquire while the holder is paused: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lb.Token <= la.Token {
		t.Fatalf("token %d after %d: fencing tokens must rise", lb.Token, la.Token)
	}
	a.(Pausable).Resume()
	waitFor(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range news {
			if e.Lost && e.Value == la.Value {
				return nil
			}
		}
		return errors.New("the paused holder never heard its lease was lost")
	})
	if err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
}
