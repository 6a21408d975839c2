package nemesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
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
// delayed restart. Its targets are drawn from the seed (one node or a majority), or, with a
// lock-aware Target, chosen when the fault starts from the lease held right then, so that the kill
// hits a holder's nodes by design rather than by luck.
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
	// Target is empty for drawn targets, or a lock-aware target kind (TargetHolder,
	// TargetHolderOne, TargetHolderMajority); those need the resolver that buildRestart sets up.
	Target string
	// TargetWait bounds how long a lock-aware fault waits for its lease before it is skipped.
	TargetWait time.Duration
	// Wipe starts the nodes without their data (Backend.StartEmpty), whatever they persist: on etcd,
	// whose members always keep their data, a member replaced after a lost disk.
	Wipe bool
	// AtGrant times each drawn fault at a grant: its first kill waits up to GrantWait for a process
	// granted the lock after the planned time (the run's own history says so, so it needs no lease
	// probe: client programs have none), and kills its drawn nodes then. A restart is over at once,
	// so it breaks a lock only while its holder still works; one that lands in the last moments of a
	// hold, or between holds, tests nothing.
	AtGrant   bool
	GrantWait time.Duration

	env      Env // the lease probe, keys and log for the lock-aware targets
	rng      *rand.Rand
	killedAt map[string]time.Time
	// lastKill are the nodes of the last kill, which a lock-aware start brings back.
	lastKill []string
	// faultStarts are the planned times of each drawn fault's first kill, which AtGrant times.
	faultStarts map[time.Duration]bool
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
	if IsResolved(r.Target) {
		return r.planLockAware(rng, timeLimit)
	}
	share := r.MajorityShare
	if share == 0 {
		share = 0.5
	}
	var plan []Op
	r.faultStarts = map[time.Duration]bool{}
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
		r.faultStarts[t] = true
		t = max(t+jitter(rng, r.Interval), back+100*time.Millisecond)
	}
	sort.SliceStable(plan, func(i, j int) bool { return plan[i].At < plan[j].At })
	return plan
}

// planLockAware plans faults whose nodes Resolve chooses: a kill, and a start of the same nodes at
// once or after Delay plus up to a quarter more.
func (r *Restart) planLockAware(rng *rand.Rand, timeLimit time.Duration) []Op {
	r.rng = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	return timedPlan(rng, r.Interval, timeLimit, func(at time.Duration) ([]Op, time.Duration) {
		up := at
		if r.Delay > 0 {
			up = at + r.Delay + time.Duration(rng.Int64N(int64(r.Delay)/4+1))
		}
		return []Op{
			{At: at, F: "kill", Effect: history.EffectFault},
			{At: up, F: "start", Effect: history.EffectHeal},
		}, up
	})
}

// Resolve implements Resolver. A lock-aware kill waits up to TargetWait for a lease of the wanted
// shape granted after it began to look, and kills its nodes (no such lease: the fault is skipped);
// its start brings back the nodes that kill took down. Operations with nodes are returned as planned.
func (r *Restart) Resolve(ctx context.Context, op Op) (Op, error) {
	if len(op.Nodes) > 0 {
		if r.AtGrant && op.F == "kill" && r.faultStarts[op.At] {
			r.waitForGrant(ctx)
		}
		return op, nil
	}
	if op.F == "start" {
		op.Nodes = sorted(r.lastKill)
		return op, nil
	}
	// A skipped kill must leave its start nothing to bring back: no heal without a fault.
	r.lastKill = nil
	if IsRoleTarget(r.Target) {
		op.Nodes = RoleNodes(r.env, r.Target)
		return op, nil
	}
	nodes, err := r.freshLeaseNodes(ctx)
	op.Nodes = nodes
	return op, err
}

// freshLeaseNodes waits for a lease that was not there when it began: a kill at the start of a hold
// leaves the holder working for its whole hold while its nodes come back empty, so a second client
// can get in while it still holds. A lease found halfway through its hold would end before the nodes
// are back, and the fault would test nothing.
func (r *Restart) freshLeaseNodes(ctx context.Context) ([]string, error) {
	const poll = 2 * time.Millisecond
	if r.rng == nil {
		r.rng = rand.New(rand.NewPCG(1, 2))
	}
	if r.env.Log == nil {
		r.env.Log = slog.New(slog.DiscardHandler)
	}
	seen := map[[2]string]bool{}
	if r.env.Probe != nil {
		qctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		for _, l := range r.env.Probe.Leases(qctx, r.env.Keys) {
			seen[[2]string{l.Key, l.Value}] = true
		}
		cancel()
	}
	deadline := time.Now().Add(r.TargetWait)
	for {
		nodes, lease, err := WaitForLeaseTarget(ctx, r.env, r.rng, r.Target, time.Until(deadline), poll)
		if errors.Is(err, ErrNoLease) || (err == nil && time.Now().After(deadline)) {
			r.env.Log.Info("restart: lock-aware fault skipped, no new lease in time", "target", r.Target, "wait", r.TargetWait)
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if !seen[[2]string{lease.Key, lease.Value}] {
			r.env.Log.Debug("restart: lease targeted", "key", lease.Key, "holders", lease.Nodes, "hit", nodes)
			return nodes, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// waitForGrant waits up to GrantWait for a grant the history records from now on; with none in
// time the fault goes ahead as planned (it is logged, not skipped: the plan's nodes still go down).
func (r *Restart) waitForGrant(ctx context.Context) {
	if r.env.Holders == nil {
		return
	}
	began := time.Now()
	h, found, err := waitForHolder(ctx, r.env.Holders, r.GrantWait, 2*time.Millisecond)
	if err == nil && (!found || h.Since.Before(began)) && r.env.Log != nil {
		r.env.Log.Info("restart: no grant in time, fault goes ahead as planned", "wait", r.GrantWait)
	}
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
		r.lastKill = slices.Clone(op.Nodes)
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
			errs[i] = r.start(ctx, node)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// start starts a node, without its data when Wipe says so.
func (r *Restart) start(ctx context.Context, node string) error {
	if !r.Wipe {
		return r.Cluster.Start(ctx, node)
	}
	empty, ok := r.Cluster.(interface {
		StartEmpty(ctx context.Context, node string) error
	})
	if !ok {
		return fmt.Errorf("restart wipe=true: this backend cannot start a node without its data")
	}
	return empty.StartEmpty(ctx, node)
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

// restartParams are the parameters of restart, and of restart-delayed when delayed.
func restartParams(delayed bool) []Param {
	ps := []Param{
		intervalParam(),
		{Name: "target", Type: TypeChoice, Values: RestartTargets(), Default: "mixed", Help: "the nodes killed: mixed draws one node or a majority per fault"},
		{Name: "wipe", Type: TypeChoice, Values: []string{"true", "false"}, Default: "false", Help: "true: the node restarts without its data"},
		{Name: "at", Type: TypeChoice, Values: []string{"plan", "grant"}, Default: "plan", Help: "grant: a drawn fault waits for a fresh grant"},
		waitParam("max(--interval/2, TTL)"),
	}
	if delayed {
		ps = append(ps, Param{Name: "delay", Type: TypeDuration, Default: "--restart-delay", Help: "how long a killed node stays down"})
	}
	return ps
}

func buildRestart(delayed bool) builder {
	return func(env Env, p *Params) (Nemesis, error) {
		r := &Restart{Cluster: env.Cluster, Nodes: env.Nodes, env: env}
		r.Interval = p.Duration("interval", env.Interval)
		switch target := p.Choice("target", "mixed", RestartTargets()...); target {
		case "one":
			r.MajorityShare = -1
		case "majority":
			r.MajorityShare = 1
		case TargetHolder, TargetHolderOne, TargetHolderMajority, TargetLeader, TargetFollowers:
			r.Target = target
		}
		r.Wipe = p.Choice("wipe", "false", "true", "false") == "true"
		r.AtGrant = p.Choice("at", "plan", "plan", "grant") == "grant"
		if r.AtGrant && r.Target != "" {
			p.fail("at=grant times the drawn targets (mixed, one, majority); target=%s chooses its nodes when its fault starts: drop at=grant", r.Target)
		}
		r.GrantWait = min(r.Interval, env.TTL) / 2
		r.TargetWait = p.Duration("wait", max(env.Interval/2, env.TTL))
		if _, ok := p.spec.Params["wait"]; ok && r.Target == "" {
			p.fail("wait= applies only to the lock-aware targets: use target=holder, holder-one or holder-majority, or drop wait")
		}
		if delayed {
			r.Delay = p.Duration("delay", env.RestartDelay)
			if r.Delay <= 0 {
				return nil, fmt.Errorf("delay must be positive")
			}
		}
		if r.Interval <= 0 {
			return nil, fmt.Errorf("interval must be positive")
		}
		if IsRoleTarget(r.Target) {
			if err := CheckTarget(env, r.Target); err != nil {
				return nil, err
			}
		}
		return r, nil
	}
}

// RestartTargets lists the restart nemesis's target values: mixed (one node or a majority, drawn per
// fault), one, majority, and the lock-aware holder kinds.
func RestartTargets() []string {
	return []string{"mixed", TargetOne, TargetMajority, TargetHolder, TargetHolderOne, TargetHolderMajority, TargetLeader, TargetFollowers}
}
