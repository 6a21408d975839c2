package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/links"
)

// Latency modes.
const (
	// LatencySteady slows the links by less than the node timeout: requests succeed, late.
	LatencySteady = "steady"
	// LatencySpike slows them by more than the node timeout: requests time out, and writes may land
	// after the client gave up on them.
	LatencySpike = "spike"
)

// Latency slows the links from client groups to target nodes with toxiproxy's latency toxic. Half
// the delay (and jitter) is added to each direction, so a request's round trip grows by delay. Each
// fault is "steady c1/n2 c2/n2" or "spike ..."; "heal ..." removes the toxics. The paths between
// servers (paths=peers) are links on the local backend, and on the docker backend of the local
// Engine the backend's PeerSlower, which adds the same to each direction on the interfaces.
type Latency struct {
	Env    Env
	Groups []string
	Modes  []string
	Target string
	// Delay and Jitter by mode.
	Delay, Jitter map[string]time.Duration
	// Duration by mode.
	Duration map[string]time.Duration
	Interval time.Duration
	// Peers slows the paths between the target nodes and the other nodes (etcd members' peer
	// traffic) instead of the paths from the client groups.
	Peers bool

	resolve leaseResolver
	paths   latencyPaths
}

// latencyTargets are the targets the latency nemesis takes.
func latencyTargets() []string {
	return []string{TargetOne, TargetMinority, TargetMajority, TargetAll, TargetHolder, TargetHolderMajority,
		TargetPrimary, TargetReplicas, TargetSentinels, TargetLeader, TargetFollowers}
}

// latencyParams are the latency nemesis's parameters.
func latencyParams() []Param {
	return []Param{
		{Name: "mode", Type: TypeChoices, Values: []string{LatencySteady, LatencySpike}, Default: "steady+spike", Help: "steady: a small delay for long; spike: a large delay for short"},
		targetParam(latencyTargets(), TargetOne),
		pathsParam(PeerLatency, "slows"),
		groupParam(nil),
		{Name: "delay", Type: TypeDuration, Default: "node timeout/2 steady, 3×node timeout spike", Help: "added to each round trip"},
		{Name: "jitter", Type: TypeDuration, Default: "delay/4", Help: "the delay varies by up to this much"},
		durationParam("2×TTL steady, TTL/2 spike", "how long a slowdown lasts"),
		intervalParam(),
	}
}

func buildLatency(env Env, p *Params) (Nemesis, error) {
	n := &Latency{Env: env, paths: &toxicLatency{toxicSet{links: env.Links}}}
	n.Modes = p.Choices("mode", []string{LatencySteady, LatencySpike}, LatencySteady, LatencySpike)
	n.Target = p.Choice("target", TargetOne, latencyTargets()...)
	n.Peers = p.Choice("paths", PathsClients, PathsClients, PathsPeers) == PathsPeers
	n.Groups = env.Groups
	if g := p.Choice("group", "", env.Groups...); g != "" {
		n.Groups = []string{g}
	}
	delay := p.Duration("delay", 0)
	jitter := p.Duration("jitter", -1)
	duration := p.Duration("duration", 0)
	n.Interval = p.Duration("interval", env.Interval)
	n.Delay = map[string]time.Duration{LatencySteady: env.NodeTimeout / 2, LatencySpike: 3 * env.NodeTimeout}
	n.Duration = map[string]time.Duration{LatencySteady: 2 * env.TTL, LatencySpike: env.TTL / 2}
	n.Jitter = map[string]time.Duration{}
	for _, m := range []string{LatencySteady, LatencySpike} {
		if delay > 0 {
			n.Delay[m] = delay
		}
		if duration > 0 {
			n.Duration[m] = duration
		}
		n.Jitter[m] = n.Delay[m] / 4
		if jitter >= 0 {
			n.Jitter[m] = jitter
		}
	}
	if n.Interval <= 0 {
		return nil, fmt.Errorf("interval must be positive")
	}
	for _, m := range n.Modes {
		if n.Delay[m] < 2*time.Millisecond {
			return nil, fmt.Errorf("delay %v is below toxiproxy's resolution (1ms each way): use delay=2ms or more", n.Delay[m])
		}
		if n.Duration[m] <= 0 {
			return nil, fmt.Errorf("duration must be positive")
		}
	}
	if n.Peers && env.Peers != nil {
		// The servers talk over their own interfaces: the backend slows those paths, or nothing can.
		if env.Slow == nil {
			return nil, errPeerLatency
		}
		n.paths = &peerLatency{slower: env.Slow, log: env.Log}
	}
	n.resolve = leaseResolver{env: env, target: n.Target}
	return n, CheckTarget(env, n.Target)
}

// Name implements Nemesis.
func (n *Latency) Name() string { return "latency" }

// Plan implements Nemesis: one slowdown at a time, each of a mode drawn from Modes. Lock-aware
// targets are left empty and chosen by Resolve.
func (n *Latency) Plan(rng *rand.Rand, timeLimit time.Duration) []Op {
	n.resolve.seed(rng)
	return timedPlan(rng, n.Interval, timeLimit, func(at time.Duration) ([]Op, time.Duration) {
		mode := n.Modes[rng.IntN(len(n.Modes))]
		end := at + n.Duration[mode]
		if IsResolved(n.Target) {
			return []Op{{At: at, F: mode, Effect: history.EffectFault}, {At: end, F: "heal", Effect: history.EffectHeal}}, end
		}
		cuts := n.cuts(PickNodes(rng, n.Env.Nodes, n.Target))
		return []Op{opWithCuts(at, mode, cuts, history.EffectFault), opWithCuts(end, "heal", cuts, history.EffectHeal)}, end
	})
}

func (n *Latency) cuts(nodes []string) Cuts {
	if n.Peers {
		return peerCuts(nodes, n.Env.Nodes)
	}
	c := Cuts{}
	for _, g := range n.Groups {
		c[g] = slices.Clone(nodes)
	}
	return c
}

// Resolve implements Resolver: a lock-aware fault waits for a lease of the wanted shape and slows
// its nodes, a role target slows the nodes that have the role now; a heal names whatever is slowed.
func (n *Latency) Resolve(ctx context.Context, op Op) (Op, error) {
	if len(op.Nodes) > 0 {
		return op, nil
	}
	if op.Effect == history.EffectHeal {
		return opWithCuts(op.At, "heal", Cuts(n.paths.inPlace()), history.EffectHeal), nil
	}
	nodes, err := n.resolve.pick(ctx, min(n.Duration[op.F]/2, n.Env.TTL))
	if err != nil || len(nodes) == 0 {
		return Op{}, err
	}
	return opWithCuts(op.At, op.F, n.cuts(nodes), history.EffectFault), nil
}

func latencyToxics(delay, jitter time.Duration) []links.Toxic {
	var out []links.Toxic
	for _, stream := range []string{"upstream", "downstream"} {
		out = append(out, links.Toxic{Name: "latency-" + stream, Type: "latency", Stream: stream, Attributes: map[string]any{
			"latency": (delay / 2).Milliseconds(), "jitter": (jitter / 2).Milliseconds(),
		}})
	}
	return out
}

// Apply implements Nemesis.
func (n *Latency) Apply(ctx context.Context, op Op) error {
	verb, cuts, err := splitVerb(op.F)
	if err != nil {
		return err
	}
	if verb != "heal" && verb != LatencySteady && verb != LatencySpike {
		return fmt.Errorf("latency nemesis cannot %q", verb)
	}
	var errs []error
	for _, g := range slices.Sorted(maps.Keys(cuts)) {
		for _, node := range cuts[g] {
			if verb == "heal" {
				errs = append(errs, n.paths.restore(ctx, g, node))
			} else {
				errs = append(errs, n.paths.slow(g, node, n.Delay[verb], n.Jitter[verb]))
			}
		}
	}
	return errors.Join(errs...)
}

// Healing implements Nemesis: restore every path still slowed (toxics, or a backend's queues).
func (n *Latency) Healing() []Op {
	cuts := Cuts(n.paths.inPlace())
	if len(cuts) == 0 {
		return nil
	}
	return []Op{opWithCuts(0, "heal", cuts, history.EffectHeal)}
}

// latencyPaths slows paths, as from -> to (a client group's link to a node, or one server's path to
// another), and restores them.
type latencyPaths interface {
	slow(from, to string, delay, jitter time.Duration) error
	restore(ctx context.Context, from, to string) error
	inPlace() map[string][]string
}

// toxicLatency slows links with latency toxics.
type toxicLatency struct{ toxicSet }

func (t *toxicLatency) slow(from, to string, delay, jitter time.Duration) error {
	return t.add(from, to, latencyToxics(delay, jitter))
}

func (t *toxicLatency) restore(ctx context.Context, from, to string) error {
	return t.remove(ctx, from, to)
}
