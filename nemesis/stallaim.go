package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lockpick-dev/lockpick/systems"
)

// A failover's stall must land at a moment no node holds a lease: a lease the replicas already have
// outlives the failover on the promoted one (its holder's release, made in the stall, never reaches
// them) and keeps the next client out until it expires. On a hot key such a moment lasts a
// millisecond or two, from a release to the next client's grant, and the stall lands a round trip
// or more after a look saw it: so the look and the stall are made with the primary's client writes
// held back (CLIENT PAUSE WRITE; replication goes on), and nothing can be granted between them.
const (
	// stallHoldMax bounds the hold: the look, the record of the stall's invoke and its toxics fit
	// in it many times over, and should the harness stall, writes resume by themselves.
	stallHoldMax = 500 * time.Millisecond
	// stallLook bounds the look at the leases inside the hold.
	stallLook = 100 * time.Millisecond
	// stallPoll is how often a stall's aim reads the leases, without a hold, while the history names
	// a holder (or when there is no history to ask); while it names none (a release was just
	// invoked, and the gap comes next) it reads them back to back, every stallSpin.
	stallPoll = 2 * time.Millisecond
	stallSpin = 200 * time.Microsecond
)

// stallHold is the hold on the primary's client writes that a stall's Resolve took at a moment no
// node held a lease; its Apply ends it once the stall is in place.
type stallHold struct {
	node    string
	took    time.Time
	release chan struct{} // closed once the stall is in place
	done    chan error    // the hold's end: nil, or why it ended before the stall was in place
}

// end lets the held writes go on; it reports how long they were held, or why the hold had ended
// before.
func (h *stallHold) end() (time.Duration, error) {
	close(h.release)
	err := <-h.done
	return time.Since(h.took), err
}

// errLeasePresent says a look inside a hold found a lease.
var errLeasePresent = errors.New("a lease is present")

// aimStall waits up to Wait for a moment no node holds a lease, and returns with the primary p's
// client writes held from a look that saw none (the stall's Apply ends the hold once its toxics are
// in place), and a note for the history saying how the stall was aimed. It looks without a hold
// first, reading the leases as often as the history suggests a gap may be coming, and takes the
// hold only when a read saw none, so that writes are held rarely and briefly. Where writes cannot
// be held (postgres) it waits for such a read alone; with no moment in time, it returns no hold,
// and the stall goes ahead with a lease present, as the note says.
func (f *Failover) aimStall(ctx context.Context, p string) (*stallHold, string) {
	if f.Env.Probe == nil || len(f.Env.Keys) == 0 {
		return nil, ""
	}
	canHold := f.Env.Writes != nil
	deadline := time.Now().Add(f.Wait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if !f.noLeaseRead(ctx, p, canHold) {
			sleepCtx(ctx, f.stallPause())
			continue
		}
		if !canHold {
			return nil, "" // as before write holds: the read saw no lease, and the stall follows
		}
		h, looked, err := f.holdStill(ctx, p)
		if h != nil {
			return h, fmt.Sprintf("client writes on %s held (CLIENT PAUSE WRITE, at most %v) from a look that found no lease on any node until the stall was in place", p, stallHoldMax)
		}
		if !looked {
			// The writes could not be held (the node refuses, or did not answer): look without.
			f.Env.Log.Info("failover: stall: client writes not held; aiming without", "primary", p, "err", err)
			canHold = false
		}
	}
	if ctx.Err() != nil {
		return nil, ""
	}
	f.Env.Log.Info("failover: stall: no moment without a lease in time; stalled anyway", "primary", p, "wait", f.Wait)
	return nil, fmt.Sprintf("no moment without a lease on any node within %v: stalled with one present", f.Wait)
}

// stallPause is how long the aim waits before its next read: back to back while the history names
// no holder, stallPoll while it names one or there is no history.
func (f *Failover) stallPause() time.Duration {
	if f.Env.Holders != nil && len(f.Env.Holders.Holders()) == 0 {
		return stallSpin
	}
	return stallPoll
}

// noLeaseRead reads the leases without a hold and reports whether no node holds one; with anywhere
// false, whether the primary p holds none (as the stall waited before write holds, and still does
// where writes cannot be held).
func (f *Failover) noLeaseRead(ctx context.Context, p string, anywhere bool) bool {
	qctx, cancel := context.WithTimeout(ctx, stallLook)
	defer cancel()
	leases := f.Env.Probe.Leases(qctx, f.Env.Keys)
	if qctx.Err() != nil {
		return false
	}
	if !anywhere {
		leases = slices.DeleteFunc(leases, func(l systems.Lease) bool { return !slices.Contains(l.Nodes, p) })
	}
	return len(leases) == 0
}

// holdStill holds p's client writes and looks at the leases. When no node holds one it returns the
// hold, still in place; otherwise the writes go on before it returns. looked is false when the
// writes could not be held at all.
func (f *Failover) holdStill(ctx context.Context, p string) (h *stallHold, looked bool, err error) {
	h = &stallHold{node: p, release: make(chan struct{}), done: make(chan error, 1)}
	seen := make(chan error, 1)
	go func() {
		h.done <- f.Env.Writes.HoldWrites(context.WithoutCancel(ctx), p, stallHoldMax, func(hctx context.Context) error {
			h.took = time.Now()
			err := f.noLeaseHeld(hctx)
			seen <- err
			if err != nil {
				return err
			}
			select {
			case <-h.release:
				return nil
			case <-hctx.Done():
				return fmt.Errorf("the hold on %s's client writes ended (%v) before the stall was in place", p, stallHoldMax)
			}
		})
	}()
	select {
	case err = <-seen:
	case err = <-h.done:
		select {
		case err = <-seen: // the look ran: its answer is the one that counts
		default:
			return nil, false, err
		}
	}
	if err != nil {
		<-h.done // the writes go on before the next try
		return nil, true, err
	}
	return h, true, nil
}

// noLeaseHeld looks at the leases inside a hold: nil when no node holds one, errLeasePresent when
// one does, the look's error when it got no answer (nothing is known then).
func (f *Failover) noLeaseHeld(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, stallLook)
	defer cancel()
	leases := f.Env.Probe.Leases(lctx, f.Env.Keys)
	if lctx.Err() != nil {
		return fmt.Errorf("look at the leases: %w", lctx.Err())
	}
	if len(leases) > 0 {
		return errLeasePresent
	}
	return nil
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
