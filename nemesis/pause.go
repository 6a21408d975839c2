package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// Pause lengths relative to the TTL.
const (
	PauseBelow  = "below"  // TTL/2: the node's keys outlive the pause
	PauseAround = "around" // TTL: keys expire about when the node wakes up
	PauseAbove  = "above"  // 2×TTL: every key the node held has expired when it wakes up
)

// Pause stops node processes with SIGSTOP ("stop") and continues them with SIGCONT ("cont"). A
// stopped node keeps its sockets open but answers nothing, like a long GC pause or a frozen VM; on
// waking it serves the requests that queued up meanwhile.
type Pause struct {
	Env    Env
	Target string
	// Durations are drawn from for each fault.
	Durations []time.Duration
	Interval  time.Duration

	resolve leaseResolver
	mu      sync.Mutex
	stopped map[string]bool
}

// pauseParams are the pause nemesis's parameters.
func pauseParams() []Param { return stopParams("how long a node stays paused") }

// stopParams are the parameters of a fault that stops a node's work for a while (pause,
// disk-stall): its target, its length (help says what), and the interval between faults.
func stopParams(help string) []Param {
	return []Param{
		targetParam(TargetKinds(), TargetOne),
		{Name: "duration", Type: TypeDuration, Values: []string{PauseBelow, PauseAround, PauseAbove}, Default: "drawn among below, around and above",
			Meanings: map[string]string{PauseBelow: "TTL/2", PauseAround: "TTL", PauseAbove: "2×TTL"}, Help: help},
		intervalParam(),
	}
}

// stopSpec is what stopParams read to: the target, the lengths drawn from, the interval.
type stopSpec struct {
	target    string
	durations []time.Duration
	interval  time.Duration
}

func readStopParams(env Env, p *Params) (stopSpec, error) {
	s := stopSpec{target: p.Choice("target", TargetOne, TargetKinds()...), interval: p.Duration("interval", env.Interval)}
	named := map[string]time.Duration{PauseBelow: env.TTL / 2, PauseAround: env.TTL, PauseAbove: 2 * env.TTL}
	s.durations = []time.Duration{named[PauseBelow], named[PauseAround], named[PauseAbove]}
	if d := p.NamedDuration("duration", 0, named); d > 0 {
		s.durations = []time.Duration{d}
	}
	if s.interval <= 0 {
		return s, fmt.Errorf("interval must be positive")
	}
	return s, CheckTarget(env, s.target)
}

func buildPause(env Env, p *Params) (Nemesis, error) {
	s, err := readStopParams(env, p)
	if err != nil {
		return nil, err
	}
	n := &Pause{Env: env, Target: s.target, Durations: s.durations, Interval: s.interval, resolve: leaseResolver{env: env, target: s.target}}
	return n, nil
}

// Name implements Nemesis.
func (n *Pause) Name() string { return "pause" }

// Plan implements Nemesis: one pause at a time. Lock-aware targets are left empty and chosen by
// Resolve.
func (n *Pause) Plan(rng *rand.Rand, timeLimit time.Duration) []Op {
	return targetPlan(rng, &n.resolve, n.Env.Nodes, n.Interval, timeLimit, "stop", "cont", func() time.Duration {
		return n.Durations[rng.IntN(len(n.Durations))]
	})
}

// targetPlan is the plan of a fault that hits target nodes (fault) and heals them (heal) after a
// drawn duration, one at a time. Lock-aware and role targets are left empty, for Resolve.
func targetPlan(rng *rand.Rand, r *leaseResolver, nodes []string, interval, timeLimit time.Duration, fault, heal string, duration func() time.Duration) []Op {
	r.seed(rng)
	return timedPlan(rng, interval, timeLimit, func(at time.Duration) ([]Op, time.Duration) {
		end := at + duration()
		var hit []string
		if !IsResolved(r.target) {
			hit = PickNodes(rng, nodes, r.target)
		}
		return []Op{
			{At: at, F: fault, Nodes: hit, Effect: history.EffectFault},
			{At: end, F: heal, Nodes: slices.Clone(hit), Effect: history.EffectHeal},
		}, end
	})
}

// Resolve implements Resolver: a lock-aware pause waits for a lease of the wanted shape and stops its
// nodes, a role target stops the nodes that have the role now; its heal continues whatever is
// stopped.
func (n *Pause) Resolve(ctx context.Context, op Op) (Op, error) {
	return resolveTargets(ctx, op, &n.resolve, n.Env.TTL, "cont", n.stoppedNodes)
}

// resolveTargets gives a planned operation without nodes its targets: a heal (F heal) takes the
// nodes still hit, a fault the nodes r picks now.
func resolveTargets(ctx context.Context, op Op, r *leaseResolver, wait time.Duration, heal string, hit func() []string) (Op, error) {
	if len(op.Nodes) > 0 {
		return op, nil
	}
	if op.F == heal {
		op.Nodes = hit()
		return op, nil
	}
	nodes, err := r.pick(ctx, wait)
	op.Nodes = nodes
	return op, err
}

func (n *Pause) stoppedNodes() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for node, s := range n.stopped {
		if s {
			out = append(out, node)
		}
	}
	slices.Sort(out)
	return out
}

// Apply implements Nemesis. A node that is down (killed by another nemesis) is neither stopped nor
// continued: there is no process to signal, and the one that replaces it starts running.
func (n *Pause) Apply(ctx context.Context, op Op) error {
	var sig syscall.Signal
	switch op.F {
	case "stop":
		sig = syscall.SIGSTOP
	case "cont":
		sig = syscall.SIGCONT
	default:
		return fmt.Errorf("pause nemesis cannot %q", op.F)
	}
	if n.Env.Cluster == nil {
		return fmt.Errorf("no cluster to pause")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped == nil {
		n.stopped = map[string]bool{}
	}
	var errs []error
	for _, node := range op.Nodes {
		if sig == syscall.SIGSTOP {
			// Marked before the signal: if the signal lands but reports an error, the heal still
			// continues the node.
			n.stopped[node] = true
		}
		if !n.Env.Cluster.Running(node) {
			n.Env.Log.Info("pause: node is down, not signalled", "node", node, "op", op.F)
			delete(n.stopped, node)
			continue
		}
		if err := n.Env.Cluster.Signal(node, sig); err != nil {
			if !n.Env.Cluster.Running(node) {
				// Killed between the check and the signal: nothing left to stop or continue.
				continue
			}
			errs = append(errs, fmt.Errorf("%s %s: %w", op.F, node, err))
			continue
		}
		if sig == syscall.SIGCONT {
			delete(n.stopped, node)
		}
	}
	return errors.Join(errs...)
}

// Healing implements Nemesis: continue every node this nemesis stopped.
func (n *Pause) Healing() []Op {
	nodes := n.stoppedNodes()
	if len(nodes) == 0 {
		return nil
	}
	return []Op{{F: "cont", Nodes: nodes, Effect: history.EffectHeal}}
}
