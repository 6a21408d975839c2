package locks

import (
	"fmt"
	"time"
)

// stillValid refuses to renew a lease whose validity ended before the renewal began: the holder
// may no longer act under it, and the key may already belong to someone else, so renewing it (even
// if the servers still hold it, inside the drift allowance) would promise a lease the lock had
// stopped promising. The request is never sent.
func stillValid(l *Lease, now time.Time) error {
	if !now.Before(l.Deadline) {
		return fmt.Errorf("%w: its validity ended %v before the renewal", ErrLeaseLost, now.Sub(l.Deadline))
	}
	return nil
}

// renewed is the lease l renewed for ttl by a renewal that began at start and was confirmed by
// nodes now. The validity counts from start, less the drift allowance, as an acquire's does. A
// confirmation that arrived after the old deadline cannot renew a lease that had ended: the
// holder's lease is over and it must stop (the servers keep the key until its TTL runs out).
func renewed(l *Lease, o Options, start time.Time, ttl time.Duration, nodes []string) (*Lease, error) {
	now := time.Now()
	if !now.Before(l.Deadline) {
		return nil, fmt.Errorf("%w: the renewal was confirmed %v after the lease had ended", ErrLeaseLost, now.Sub(l.Deadline))
	}
	deadline := o.deadline(start, ttl)
	if !deadline.After(now) {
		return nil, fmt.Errorf("renewal confirmed after the validity it would give was used up (%v)", now.Sub(start))
	}
	nl := *l
	nl.Start, nl.Deadline, nl.Validity, nl.Nodes = start, deadline, deadline.Sub(now), nodes
	return &nl, nil
}
