// Package nemesis injects faults on a seeded schedule and records every fault and heal in the
// history.
//
// A nemesis bundles a fault, the schedule it follows, and its final heal: Plan draws the schedule
// from the run's seed before the run starts, Apply performs one operation, and Heal undoes whatever is
// still broken. Run executes a plan against the run clock and always heals before it returns.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// Op is one scheduled nemesis operation.
type Op struct {
	// At is when the operation starts, from the start of the run.
	At time.Duration `json:"at"`
	// F is what it does: kill, start, ...
	F string `json:"f"`
	// Nodes are its targets.
	Nodes []string `json:"nodes"`
	// Effect is history.EffectFault or history.EffectHeal.
	Effect string `json:"effect"`
}

func (o Op) String() string { return fmt.Sprintf("%s %s", o.F, strings.Join(o.Nodes, " ")) }

// Nemesis is one fault injector.
type Nemesis interface {
	// Name is how the nemesis is called on the command line and in the history.
	Name() string
	// Plan draws the schedule for a run whose faults must start before timeLimit. The same rng
	// state gives the same plan.
	Plan(rng *rand.Rand, timeLimit time.Duration) []Op
	// Apply performs one operation.
	Apply(ctx context.Context, op Op) error
	// Healing lists the operations that undo every fault still in effect.
	Healing() []Op
}

// Resolver is a nemesis that chooses its targets when an operation runs rather than when it is
// planned: lock-aware targeting waits for the lease it wants to hit. Resolve may wait (bounded by
// ctx) and returns the operation with its real targets; an operation resolved to no nodes is skipped.
type Resolver interface {
	Resolve(ctx context.Context, op Op) (Op, error)
}

// Annotator is a nemesis that adds facts to the events of its operations: the clock nemesis records
// the offsets it sets on the invoke and the offsets it measured on the completion. Annotate is
// called before the invoke is recorded (ev.Type is Invoke) and after Apply, before the completion
// is recorded; err is Apply's error.
type Annotator interface {
	Annotate(ctx context.Context, op Op, ev *history.Event, err error)
}

// Seed derives the nemesis's random source from the run seed, so the schedule depends on nothing else.
func Seed(runSeed uint64, name string) *rand.Rand {
	var h uint64 = 14695981039346656037
	for _, c := range []byte(name) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return rand.New(rand.NewPCG(runSeed, h))
}

// Recorder is where Run records nemesis events.
type Recorder interface {
	Record(history.Event) history.Event
	Start() time.Time
}

// Run executes plan on the run clock until the plan ends or ctx is done, then heals. Every
// operation is recorded as an invoke and an info completion, as Jepsen records its nemesis.
func Run(ctx context.Context, n Nemesis, plan []Op, rec Recorder) error {
	var errs []error
	for _, op := range plan {
		wait := time.Until(rec.Start().Add(op.At))
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		// An operation once begun runs to its end: a kill cut short by the time limit would leave a
		// fault nobody recorded as healed.
		if r, ok := n.(Resolver); ok {
			// Waiting for a target may be cut short by the time limit; the fault then never starts.
			resolved, err := r.Resolve(ctx, op)
			if err != nil {
				if ctx.Err() == nil {
					errs = append(errs, fmt.Errorf("%s %s: choose targets: %w", n.Name(), op, err))
				}
				continue
			}
			if len(resolved.Nodes) == 0 {
				continue
			}
			op = resolved
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		err := apply(actx, n, op, rec)
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
	}
	// The run always ends healed, even when interrupted.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, op := range n.Healing() {
		if err := apply(hctx, n, op, rec); err != nil {
			errs = append(errs, fmt.Errorf("heal: %w", err))
		}
	}
	return errors.Join(errs...)
}

func apply(ctx context.Context, n Nemesis, op Op, rec Recorder) error {
	ev := history.Event{Type: history.Invoke, Process: history.NemesisProcess, F: op.F, Nodes: op.Nodes, Fault: n.Name(), Effect: op.Effect}
	an, annotates := n.(Annotator)
	if annotates {
		an.Annotate(ctx, op, &ev, nil)
	}
	rec.Record(ev)
	err := n.Apply(ctx, op)
	ev.Type = history.Info
	ev.Offsets = nil
	if err != nil {
		ev.Error = err.Error()
	}
	if annotates {
		an.Annotate(ctx, op, &ev, err)
	}
	rec.Record(ev)
	if err != nil {
		return fmt.Errorf("%s %s: %w", n.Name(), op, err)
	}
	return nil
}

// None is the nemesis that does nothing.
type None struct{}

// Name implements Nemesis.
func (None) Name() string { return "none" }

// Plan implements Nemesis.
func (None) Plan(*rand.Rand, time.Duration) []Op { return nil }

// Apply implements Nemesis.
func (None) Apply(context.Context, Op) error { return nil }

// Healing implements Nemesis.
func (None) Healing() []Op { return nil }
