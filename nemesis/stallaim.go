package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/systems"
)

// A failover's stall must land at a moment no node holds a lease: a lease the replicas already have
// outlives the failover on the promoted one (its holder's release, made in the stall, never reaches
// them) and keeps the next client out until it expires. On a hot key such a moment is short: a
// millisecond or two from a release to the next grant where refused clients retry, well under one
// where they wait for the release's message (the watchdog locks), and a stall made a round trip
// after a look that saw it misses it. So the look and the stall are made with the primary's client
// writes held back (CLIENT PAUSE WRITE; replication goes on), and nothing can be granted between
// them. Reads catch the gaps of retrying clients; for the others, the hold is taken as the history
// records a release's invoke, the recorder waiting until it is in place (ReleaseWatcher), so the
// release reaches a primary that holds it back; the hold is then stepped (the writes held so far
// run, then are held again) until a look finds the release done and no new grant. A grant that
// follows the release comes a round trip after it at the least, and the step's PAUSE, sent as its
// UNPAUSE is answered, usually comes first; on a loaded machine it loses that race now and then,
// and the next release is tried. (A PAUSE written on a second connection before the UNPAUSE is
// answered lost it more often, measured: the node often took both in one pass, and a wait between
// them let the woken clients in.)
const (
	// stallHoldMax bounds the hold: the look, the steps, the record of the stall's invoke and its
	// toxics fit in it many times over, and should the harness stall, writes resume by themselves.
	stallHoldMax = 500 * time.Millisecond
	// stallLook bounds one look at the leases.
	stallLook = 100 * time.Millisecond
	// stallSteps bounds how long a hold taken at a release is stepped, waiting for the release.
	stallSteps = 50 * time.Millisecond
	// stallPoll is how often a stall's aim reads the leases without a hold.
	stallPoll = 2 * time.Millisecond
	// stallAck bounds how long a release invoked waits for the hold it asked for.
	stallAck = 5 * time.Millisecond
	// stallStep is how long a hold waits for replicas to catch up before it looks again.
	stallStep = 100 * time.Microsecond
)

// stallHold is the hold on the primary's client writes that a stall's Resolve took at a moment no
// node held a lease; its Apply ends it once the stall is in place.
type stallHold struct {
	node    string
	took    time.Time
	steps   int           // how often the held writes ran before the look that found no lease
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
// in place), and a note for the history saying how the stall was aimed. It takes the hold when a
// read without it saw no lease, or at once when the history records a release invoked; so writes
// are held rarely and briefly. Where writes cannot be held (postgres) it waits for such a read
// alone; with no moment in time, it returns no hold, and the stall goes ahead with a lease present,
// as the note says.
func (f *Failover) aimStall(ctx context.Context, p string) (*stallHold, string) {
	if f.Env.Probe == nil || len(f.Env.Keys) == 0 {
		return nil, ""
	}
	canHold := f.Env.Writes != nil
	// A release invoked asks for a hold and waits (at most stallAck) until it is in place, so that
	// the release reaches a primary that holds it, and the grant after it too. The watch starts once
	// a hold was taken: where writes cannot be held, no release waits for one.
	var releases chan chan struct{}
	stop := func() {}
	defer func() { stop() }()
	watch := func() {
		w, ok := f.Env.Holders.(ReleaseWatcher)
		if !ok || releases != nil {
			return
		}
		releases = make(chan chan struct{}, 1)
		stop = w.OnRelease(func() {
			held := make(chan struct{})
			select {
			case releases <- held:
			default:
				return // a release asked already and is being served
			}
			t := time.NewTimer(stallAck)
			defer t.Stop()
			select {
			case <-held:
			case <-t.C:
			}
		})
	}
	wait := time.NewTimer(f.Wait)
	defer wait.Stop()
	poll := time.NewTicker(stallPoll)
	defer poll.Stop()
	refused := 0 // holds refused in a row
	// The first try holds and looks without a read first: it opens the connection holds are taken
	// through, so that one taken at a release does not wait for a dial.
	warm := canHold
	for {
		var released chan struct{}
		select {
		case <-ctx.Done():
			return nil, ""
		case <-wait.C:
			f.Env.Log.Info("failover: stall: no moment without a lease in time; stalled anyway", "primary", p, "wait", f.Wait)
			return nil, fmt.Sprintf("no moment without a lease on any node within %v: stalled with one present", f.Wait)
		case released = <-releases:
		case <-poll.C:
		}
		if released != nil && !canHold {
			close(released) // no hold comes: the release goes on
			released = nil
		}
		gap := released == nil && (warm || f.noLeaseRead(ctx, p, canHold))
		warm = false
		if !canHold && gap {
			return nil, "" // as before write holds: the read saw no lease, and the stall follows
		}
		if !canHold || !gap && released == nil {
			continue
		}
		h, looked, err := f.holdStill(ctx, p, released)
		if h != nil {
			return h, fmt.Sprintf("client writes on %s held (CLIENT PAUSE WRITE, at most %v) from a look that found no lease on any node until the stall was in place", p, stallHoldMax)
		}
		if looked {
			refused = 0
			watch()
		} else if refused++; refused == 3 {
			// The writes cannot be held (the node refuses, or does not answer): look without.
			f.Env.Log.Info("failover: stall: client writes not held; aiming without", "primary", p, "err", err)
			canHold = false
		}
	}
}

// noLeaseRead reads the leases without a hold and reports whether no node holds one; with anywhere
// false, whether the primary p holds none (as the stall waited before write holds, and still does
// where writes cannot be held).
func (f *Failover) noLeaseRead(ctx context.Context, p string, anywhere bool) bool {
	leases, err := f.leasesHeld(ctx)
	if err != nil {
		return false
	}
	if !anywhere {
		leases = slices.DeleteFunc(leases, func(l systems.Lease) bool { return !slices.Contains(l.Nodes, p) })
	}
	return len(leases) == 0
}

// holdStill holds p's client writes and looks at the leases. When a look finds no lease on any node
// it returns the hold, still in place; otherwise the writes go on before it returns. looked is false
// when the writes could not be held at all. With released (a release is waiting for the hold,
// closed once it is in place) it goes on looking for up to stallSteps while only the leases it first
// saw are there: when the primary holds one (the release, held back) it steps the hold, so that the
// release runs and the grant that follows it, a round trip behind, is held; when only replicas do
// (the release has run, and is on its way to them) it looks again.
func (f *Failover) holdStill(ctx context.Context, p string, released chan struct{}) (h *stallHold, looked bool, err error) {
	h = &stallHold{node: p, release: make(chan struct{}), done: make(chan error, 1)}
	var once sync.Once
	ack := func() {
		if released != nil {
			once.Do(func() { close(released) })
		}
	}
	defer ack()
	seen := make(chan error, 1)
	still := func(hctx context.Context, step func(context.Context) error) error {
		h.took = time.Now()
		ack()
		first, err := f.leasesHeld(hctx)
		leases := first
		for err == nil && len(leases) > 0 && released != nil && time.Since(h.took) < stallSteps && within(leases, first) {
			switch {
			case !slices.ContainsFunc(leases, func(l systems.Lease) bool { return slices.Contains(l.Nodes, p) }):
				sleepCtx(hctx, stallStep)
			case step == nil:
				err = errLeasePresent
				continue
			default:
				if err = step(hctx); err != nil {
					continue
				}
				h.steps++
			}
			leases, err = f.leasesHeld(hctx)
		}
		if err == nil && len(leases) > 0 {
			err = errLeasePresent
			if released != nil {
				f.Env.Log.Info("failover: stall: the hold taken at a release found a lease", "primary", p, "first", first, "last", leases,
					"steps", h.steps, "held", time.Since(h.took))
			}
		}
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
	}
	go func() {
		hold := context.WithoutCancel(ctx)
		if s, ok := f.Env.Writes.(WriteStepper); ok && released != nil {
			h.done <- s.HoldWritesStepping(hold, p, stallHoldMax, still)
			return
		}
		h.done <- f.Env.Writes.HoldWrites(hold, p, stallHoldMax, func(hctx context.Context) error { return still(hctx, nil) })
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

// leasesHeld looks at the leases (inside a hold, or before one); an error when the look got no
// answer (nothing is known then).
func (f *Failover) leasesHeld(ctx context.Context) ([]systems.Lease, error) {
	lctx, cancel := context.WithTimeout(ctx, stallLook)
	defer cancel()
	leases := f.Env.Probe.Leases(lctx, f.Env.Keys)
	if lctx.Err() != nil {
		return nil, fmt.Errorf("look at the leases: %w", lctx.Err())
	}
	return leases, nil
}

// within says whether every lease in now was among was: no new grant came.
func within(now, was []systems.Lease) bool {
	for _, l := range now {
		if !slices.ContainsFunc(was, func(w systems.Lease) bool { return w.Key == l.Key && w.Value == l.Value }) {
			return false
		}
	}
	return true
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
