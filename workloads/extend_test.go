package workloads_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/systems"
	"github.com/lockpick-dev/lockpick/workloads"
)

// runMutex runs m against one real node with the named lock and checks the history.
func runMutex(t *testing.T, lock string, m workloads.Mutex, d time.Duration) *checker.Result {
	t.Helper()
	c, err := systems.StartLocal(context.Background(), systems.LocalConfig{Nodes: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	path := filepath.Join(t.TempDir(), history.FileName)
	rec, err := history.Create(path, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	node := c.Nodes()[0]
	env := workloads.Env{Recorder: rec, NewLocker: func(int) (locks.Locker, error) {
		return locks.New(lock, []locks.Endpoint{{Node: node.Name, Addr: node.Addr()}}, locks.Options{NodeTimeout: 200 * time.Millisecond})
	}}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := m.Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	rec.Close()
	evs, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := checker.Check(evs, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Holders that renew their leases on a correct lock: renewals succeed and carry the deadline the
// checker extends holds to, late renewals are refused, and nothing is found.
func TestExtendingHoldersOnACorrectLock(t *testing.T) {
	r := runMutex(t, "single", workloads.Mutex{Clients: 4, Keys: 1, TTL: 300 * time.Millisecond, Extend: true, Seed: 3}, 4*time.Second)
	if r.LockValid != checker.Valid || r.EarlyLossCount+r.LateExtendCount+r.ViolationCount > 0 {
		t.Fatalf("lock %v: %d violations, %d early losses, %d late extends; want valid with none\n%s",
			r.LockValid, r.ViolationCount, r.EarlyLossCount, r.LateExtendCount, r.Summary())
	}
	if r.Stats.Extends.OK == 0 {
		t.Fatalf("no renewal succeeded:\n%s", r.Summary())
	}
}

// The same holders on a lock that renews without checking ownership or validity are caught. A
// late extend is a grant of its own, so it is caught where it renews a key another client was
// granted in the meantime: waiters that retry within 2 ms take the key as soon as it expires, well
// inside the up to 60 ms by which one renewal in ten comes late.
func TestExtendingHoldersCatchABlindExtend(t *testing.T) {
	r := runMutex(t, locks.MutantPrefix+"single-extend-unchecked", workloads.Mutex{Clients: 9, Keys: 3, TTL: 300 * time.Millisecond, Extend: true, ThinkMax: 2 * time.Millisecond, Seed: 3}, 6*time.Second)
	if r.LockValid != checker.Invalid {
		t.Fatalf("lock %v, want invalid:\n%s", r.LockValid, r.Summary())
	}
}

// Careful holders on a correct lock never overrun, and releases near the deadline are not early
// losses. The TTL is long enough that the careful margin (a twentieth of it, 50 ms) is more than a
// loaded machine oversleeps a holder's work by (a 300 ms TTL's 15 ms margin was not).
func TestCarefulHoldersDoNotOverrun(t *testing.T) {
	r := runMutex(t, "single", workloads.Mutex{Clients: 4, Keys: 1, TTL: time.Second, Careful: true, Seed: 5}, 5*time.Second)
	if r.LockValid != checker.Valid || r.EarlyLossCount > 0 || r.OverrunCount > 0 {
		t.Fatalf("lock %v with %d early losses and %d overruns, want valid with none:\n%s", r.LockValid, r.EarlyLossCount, r.OverrunCount, r.Summary())
	}
}
