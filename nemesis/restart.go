package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// Processes is the part of a cluster the restart nemesis drives.
type Processes interface {
	Kill(node string) error
	Start(ctx context.Context, node string) error
	Running(node string) bool
}

// Restart kills nodes with SIGKILL and starts them again. With Delay zero they come back at once
// (empty, unless the nodes persist); otherwise each stays down at least Delay, the Redlock spec's
// delayed restart.
type Restart struct {
	Cluster Processes
	// Nodes are the nodes it may target.
	Nodes []string
	// Interval is the mean time between faults.
	Interval time.Duration
	// Delay is the least time a killed node stays down; zero restarts it at once.
	Delay time.Duration
	// MajorityShare is the share of faults that kill a majority in quick succession rather than one
	// node. Zero means 0.5; negative means never.
	MajorityShare float64

	killedAt map[string]time.Time
}

// Name implements Nemesis.
func (r *Restart) Name() string {
	if r.Delay > 0 {
		return "restart-delayed"
	}
	return "restart"
}

// Plan implements Nemesis. A fault kills one node or a majority, each kill a few milliseconds after
// the last, so that a lease granted by the majority loses its keys before its holder lets go. The
// next fault starts only after every node of the previous one is back.
func (r *Restart) Plan(rng *rand.Rand, timeLimit time.Duration) []Op {
	share := r.MajorityShare
	if share == 0 {
		share = 0.5
	}
	var plan []Op
	t := jitter(rng, r.Interval)
	for {
		targets := []string{r.Nodes[rng.IntN(len(r.Nodes))]}
		if len(r.Nodes) > 1 && rng.Float64() < share {
			perm := rng.Perm(len(r.Nodes))[:len(r.Nodes)/2+1]
			targets = targets[:0]
			for _, i := range perm {
				targets = append(targets, r.Nodes[i])
			}
		}
		var ops []Op
		at, back := t, t
		for i, node := range targets {
			if i > 0 {
				at += time.Duration(rng.Int64N(int64(5*time.Millisecond))) + time.Millisecond
			}
			ops = append(ops, Op{At: at, F: "kill", Nodes: []string{node}, Effect: history.EffectFault})
			if r.Delay > 0 {
				// Each node stays down its own Delay plus up to a quarter more, so restarts are spread out.
				up := at + r.Delay + time.Duration(rng.Int64N(int64(r.Delay)/4+1))
				ops = append(ops, Op{At: up, F: "start", Nodes: []string{node}, Effect: history.EffectHeal})
				back = max(back, up)
			}
		}
		if r.Delay == 0 {
			back = at
			ops = append(ops, Op{At: at, F: "start", Nodes: sorted(targets), Effect: history.EffectHeal})
		}
		if back >= timeLimit {
			// Every fault heals on schedule inside the fault phase.
			break
		}
		plan = append(plan, ops...)
		t = max(t+jitter(rng, r.Interval), back+100*time.Millisecond)
	}
	sort.SliceStable(plan, func(i, j int) bool { return plan[i].At < plan[j].At })
	return plan
}

// jitter returns a duration uniform in [d/2, 3d/2).
func jitter(rng *rand.Rand, d time.Duration) time.Duration {
	return d/2 + time.Duration(rng.Int64N(int64(d)+1))
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// Apply implements Nemesis. The nodes of one operation are handled in parallel, so that restarting a
// majority takes as long as restarting one node.
func (r *Restart) Apply(ctx context.Context, op Op) error {
	if op.F != "kill" && op.F != "start" {
		return fmt.Errorf("restart nemesis cannot %q", op.F)
	}
	if r.killedAt == nil {
		r.killedAt = map[string]time.Time{}
	}
	if op.F == "kill" {
		for _, node := range op.Nodes {
			r.killedAt[node] = time.Now()
		}
	}
	errs := make([]error, len(op.Nodes))
	var wg sync.WaitGroup
	for i, node := range op.Nodes {
		killedAt := r.killedAt[node]
		wg.Go(func() {
			if op.F == "kill" {
				errs[i] = r.Cluster.Kill(node)
				return
			}
			if r.Cluster.Running(node) {
				return
			}
			// Even a final heal keeps a delayed node down for its whole Delay: healing early would
			// turn the safe delayed restart into the unsafe immediate one.
			if wait := time.Until(killedAt.Add(r.Delay)); r.Delay > 0 && wait > 0 {
				select {
				case <-ctx.Done():
					errs[i] = ctx.Err()
					return
				case <-time.After(wait):
				}
			}
			errs[i] = r.Cluster.Start(ctx, node)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Healing implements Nemesis: start every node that is down.
func (r *Restart) Healing() []Op {
	var down []string
	for _, n := range r.Nodes {
		if !r.Cluster.Running(n) {
			down = append(down, n)
		}
	}
	if len(down) == 0 {
		return nil
	}
	return []Op{{F: "start", Nodes: down, Effect: history.EffectHeal}}
}
