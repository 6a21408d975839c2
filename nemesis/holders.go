package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// GroupHolder is the value of a partition's group parameter that aims each fault at the client
// group of a process that holds a lock right then.
const GroupHolder = "holder"

// Holder is a process that holds a lock now, as the harness saw its grant in the history.
type Holder struct {
	Process int
	// Group is the client group the process reaches the nodes through.
	Group string
	Key   string
	// Since is when its grant completed.
	Since time.Time
}

// HolderView reports the processes that hold a lock now: those whose grant the history has recorded
// and whose release it has not. The harness follows its own history; nothing of the workload or
// the lock is needed.
type HolderView interface {
	Holders() []Holder
}

// ReleaseWatcher is a HolderView that also tells of every release as the history records its
// invoke, before the releasing client goes on to send it: the failover's stall holds the primary's
// writes then, so that the release and the grant after it reach a node that holds them.
type ReleaseWatcher interface {
	// OnRelease calls f as each release's invoke is recorded, from now until stop is called. The
	// releasing client, and every other event's record, wait for f: it must return quickly, and
	// must not ask for the holders.
	OnRelease(f func()) (stop func())
}

// waitForHolder picks the process whose hold a fault should hit: the first granted a lock after the
// wait began, polling holders every poll for up to wait; when none was, the one granted most
// recently among those that hold a lock now; ok is false when nobody does. A hold hit at its start
// has all its work still ahead, and outlasts the lease that a cut holder can no longer renew; one
// hit late in its work ends before anyone else can get in.
func waitForHolder(ctx context.Context, view HolderView, wait, poll time.Duration) (h Holder, ok bool, err error) {
	if view == nil {
		return Holder{}, false, errors.New("group=holder needs the run's view of who holds the lock")
	}
	began := time.Now()
	deadline := began.Add(wait)
	for {
		var newest Holder
		found := false
		for _, c := range view.Holders() {
			if !found || c.Since.After(newest.Since) {
				newest, found = c, true
			}
		}
		if found && !newest.Since.Before(began) {
			return newest, true, nil
		}
		if time.Now().After(deadline) {
			return newest, found, nil
		}
		select {
		case <-ctx.Done():
			return Holder{}, false, fmt.Errorf("wait for a holder: %w", ctx.Err())
		case <-time.After(poll):
		}
	}
}
