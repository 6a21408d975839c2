package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// NetCutter cuts nodes off the network at their own interfaces, below every proxy of the harness:
// the docker backend does it with packet filter rules in each container's network namespace.
type NetCutter interface {
	// CutNetwork cuts node off from the harness and its clients: mode ModeDrop drops every packet
	// both ways, ModeReset answers new and open connections with a TCP reset. A cut outlives a
	// restart of the node.
	CutNetwork(ctx context.Context, node, mode string) error
	// HealNetwork removes node's cut.
	HealNetwork(ctx context.Context, node string) error
}

// NetCut cuts the target nodes' own network interfaces ("cut"), then heals them ("heal"). With the
// nodes in containers, every path to a node crosses its interface, so this is the partition a real
// network makes: established connections stall (drop) or reset (reset), new ones never open.
type NetCut struct {
	Env      Env
	Target   string
	Mode     string
	Duration time.Duration
	Interval time.Duration

	resolve leaseResolver
	mu      sync.Mutex
	cut     map[string]bool
}

// netcutParams are the netcut nemesis's parameters.
func netcutParams() []Param {
	return []Param{
		targetParam(TargetKinds(), TargetOne),
		{Name: "mode", Type: TypeChoice, Values: []string{ModeDrop, ModeReset}, Default: ModeDrop, Help: "drop: packets vanish both ways; reset: connections are answered with TCP resets"},
		durationParam("2×TTL", "how long a cut lasts"),
		intervalParam(),
	}
}

func buildNetCut(env Env, p *Params) (Nemesis, error) {
	n := &NetCut{Env: env, resolve: leaseResolver{env: env}}
	n.Target = p.Choice("target", TargetOne, TargetKinds()...)
	n.resolve.target = n.Target
	n.Mode = p.Choice("mode", ModeDrop, ModeDrop, ModeReset)
	n.Duration = p.Duration("duration", 2*env.TTL)
	n.Interval = p.Duration("interval", env.Interval)
	if n.Duration <= 0 || n.Interval <= 0 {
		return nil, fmt.Errorf("duration and interval must be positive")
	}
	return n, CheckTarget(env, n.Target)
}

// Name implements Nemesis.
func (n *NetCut) Name() string { return "netcut" }

// Plan implements Nemesis: one cut at a time; lock-aware and role targets are chosen by Resolve.
func (n *NetCut) Plan(rng *rand.Rand, timeLimit time.Duration) []Op {
	return targetPlan(rng, &n.resolve, n.Env.Nodes, n.Interval, timeLimit, "cut", "heal", func() time.Duration { return n.Duration })
}

// Resolve implements Resolver: a lease or role target cuts the nodes it names when the fault
// starts; its heal heals whatever is cut.
func (n *NetCut) Resolve(ctx context.Context, op Op) (Op, error) {
	return resolveTargets(ctx, op, &n.resolve, n.Env.TTL, "heal", n.cutNodes)
}

func (n *NetCut) cutNodes() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for node := range n.cut {
		out = append(out, node)
	}
	slices.Sort(out)
	return out
}

// Apply implements Nemesis.
func (n *NetCut) Apply(ctx context.Context, op Op) error {
	if n.Env.Net == nil {
		return fmt.Errorf("netcut: the backend cannot cut a node's network")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut == nil {
		n.cut = map[string]bool{}
	}
	var errs []error
	for _, node := range op.Nodes {
		switch op.F {
		case "cut":
			// Marked first: a cut that half landed is healed all the same.
			n.cut[node] = true
			errs = append(errs, n.Env.Net.CutNetwork(ctx, node, n.Mode))
		case "heal":
			if err := n.Env.Net.HealNetwork(ctx, node); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(n.cut, node)
		default:
			return fmt.Errorf("netcut nemesis cannot %q", op.F)
		}
	}
	return errors.Join(errs...)
}

// Healing implements Nemesis: heal every node still cut.
func (n *NetCut) Healing() []Op {
	nodes := n.cutNodes()
	if len(nodes) == 0 {
		return nil
	}
	return []Op{{F: "heal", Nodes: nodes, Effect: history.EffectHeal}}
}
