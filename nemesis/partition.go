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

// Partition kinds: which paths between client groups and nodes a partition cuts.
const (
	// PartIsolate cuts every client group from one node.
	PartIsolate = "isolate"
	// PartClientMinority cuts one client group from a minority of the nodes.
	PartClientMinority = "client-minority"
	// PartClientMajority cuts one client group from a majority of the nodes.
	PartClientMajority = "client-majority"
	// PartClientAll cuts one client group from every node: on a system whose members forward to
	// the leader, a group cut from a majority still reaches the quorum through the rest.
	PartClientAll = "client-all"
	// PartBridge gives two sets of groups overlapping majorities: with five nodes one side sees n1..n3,
	// the other n3..n5 (after a random relabelling). With one group, the group sees a bare majority.
	PartBridge = "bridge"
	// PartHalves splits groups and nodes into random halves; each group half sees only its node half.
	// With one group, the group sees a random half of the nodes.
	PartHalves = "halves"
)

// Paths a partition or a slowdown takes.
const (
	// PathsClients: the paths from client groups to nodes.
	PathsClients = "clients"
	// PathsPeers: the paths between the target nodes and every other node, both ways (etcd
	// members' peer traffic), so that the targets are cut off from their peers while the clients
	// still reach every node.
	PathsPeers = "peers"
)

// peerCuts are the cuts between nodes and the rest of all, both ways: the link from each of nodes to
// each other node, and back.
func peerCuts(nodes, all []string) Cuts {
	c := Cuts{}
	for _, a := range nodes {
		for _, b := range all {
			if slices.Contains(nodes, b) {
				continue
			}
			c[a] = append(c[a], b)
			c[b] = append(c[b], a)
		}
	}
	for _, ns := range c {
		slices.Sort(ns)
	}
	return c
}

// PartitionKinds lists the partition kinds.
func PartitionKinds() []string {
	return []string{PartIsolate, PartClientMinority, PartClientMajority, PartClientAll, PartBridge, PartHalves}
}

// Partition modes: what a cut path does to traffic.
const (
	// ModeDrop: requests and replies vanish, as dropped packets; a request hangs until the client's
	// node timeout. Toxiproxy's timeout toxic with timeout 0 on both directions.
	ModeDrop = "drop"
	// ModeReset: the peer resets; requests fail at once and are not delivered, on open and new
	// connections alike. Toxiproxy's reset_peer toxic on both directions.
	ModeReset = "reset"
	// ModeLoseReply: requests are delivered and the replies lost, so the client cannot know whether
	// its write landed. A timeout toxic on the downstream (node to client) only.
	ModeLoseReply = "lose-reply"
	// ModeStall: nothing gets through either way, and what was held back is delivered at the heal,
	// as TCP lives through a partition (links.Stall): no connection is closed. The timeout toxic of
	// drop closes every connection it held when removed, which ends the sessions of a system whose
	// session is the connection (PostgreSQL's advisory locks) at the heal.
	ModeStall = "stall"
)

// partitionMinNodes is the least cluster in which a kind cuts anything a client can notice.
func partitionMinNodes(kind string) int {
	switch kind {
	case PartBridge:
		return 3
	case PartHalves:
		return 2
	}
	return 1
}

// PartitionModes lists the partition modes.
func PartitionModes() []string { return []string{ModeDrop, ModeReset, ModeLoseReply, ModeStall} }

// Partition cuts paths between client groups and nodes with toxics on their links. Each fault is
// one operation "cut c1/n4,n5 c2/n1,n2" (group/nodes it is cut from) whose Nodes are every node cut,
// healed by "heal" with the same cuts.
type Partition struct {
	Nodes  []string
	Groups []string
	// Kinds are drawn from for each fault.
	Kinds []string
	Mode  string
	// Group is the group client-minority and client-majority cut; empty draws one per fault, and
	// GroupHolder cuts, for each fault, the group of a process granted a lock just then.
	Group    string
	Duration time.Duration
	Interval time.Duration
	// Target, when set, is a role target (primary, replicas): each fault cuts the client groups
	// (or Group) from the nodes holding that role when it starts, so "cut the clients from the
	// primary" follows a failover. Kinds are then not drawn.
	Target string
	// Peers cuts the target nodes (Target, or one node drawn per fault) from the other nodes
	// instead of cutting client groups: paths=peers.
	Peers bool
	// HolderWait bounds how long a group=holder fault waits for a fresh grant before it takes the
	// newest holder instead. The cut then lasts its whole Duration from when it began.
	HolderWait time.Duration

	env      Env
	rng      *rand.Rand // draws the kinds and nodes of faults resolved when they start
	toxics   pathCutter
	lastCuts Cuts      // the cuts of the resolved fault in effect, which its heal undoes
	cutAt    time.Time // when that fault's cut was resolved
}

// partitionParams are the partition nemesis's parameters.
func partitionParams() []Param {
	return []Param{
		{Name: "kind", Type: TypeChoices, Values: PartitionKinds(), Default: "every kind the node count allows", Help: "which paths a fault cuts"},
		{Name: "mode", Type: TypeChoice, Values: PartitionModes(), Default: ModeDrop, Help: "what a cut path does to traffic"},
		groupParam([]string{GroupHolder}),
		durationParam("2×TTL", "how long a cut lasts"),
		{Name: "wait", Type: TypeDuration, Default: "duration", Help: "with group=holder, how long a fault waits for a holder"},
		intervalParam(),
		{Name: "target", Type: TypeChoice, Values: []string{TargetPrimary, TargetReplicas, TargetLeader, TargetFollowers}, Default: "the nodes of the kind",
			Help: "cut the nodes of a role"},
		pathsParam(PeerCuts, "cuts"),
	}
}

func buildPartition(env Env, p *Params) (Nemesis, error) {
	n := &Partition{Nodes: env.Nodes, Groups: env.Groups, env: env, toxics: &toxicSet{links: env.Links}}
	// The default draws among the kinds that make sense for the cluster's size; a kind asked for by
	// name that does not is an error.
	var kinds []string
	for _, k := range PartitionKinds() {
		// client-all only when asked for: the default draws stay what they were.
		if k != PartClientAll && len(env.Nodes) >= partitionMinNodes(k) {
			kinds = append(kinds, k)
		}
	}
	n.Kinds = p.Choices("kind", kinds, PartitionKinds()...)
	n.Mode = p.Choice("mode", ModeDrop, PartitionModes()...)
	n.Group = p.Choice("group", "", append(slices.Clone(env.Groups), GroupHolder)...)
	n.Duration = p.Duration("duration", 2*env.TTL)
	n.HolderWait = p.Duration("wait", n.Duration)
	if _, ok := p.spec.Params["wait"]; ok && n.Group != GroupHolder {
		p.fail("wait= applies only to group=holder: add group=holder, or drop wait")
	}
	n.Interval = p.Duration("interval", env.Interval)
	n.Target = p.Choice("target", "", TargetPrimary, TargetReplicas, TargetLeader, TargetFollowers)
	n.Peers = p.Choice("paths", PathsClients, PathsClients, PathsPeers) == PathsPeers
	if n.Peers {
		// The paths between servers: links on the local backend, the servers' own interfaces where
		// the backend offers that.
		mode := n.Mode
		if mode == ModeStall {
			mode = ModeDrop // on a real interface a dropped path is a stall (peerpaths.go)
		}
		n.toxics = serverPaths(env, mode)
	}
	if n.Target != "" {
		if err := CheckTarget(env, n.Target); err != nil {
			return nil, err
		}
	}
	if n.Duration <= 0 {
		return nil, fmt.Errorf("duration must be positive")
	}
	if n.Interval <= 0 {
		return nil, fmt.Errorf("interval must be positive")
	}
	if len(env.Groups) == 0 || len(env.Nodes) == 0 {
		return nil, fmt.Errorf("needs at least one client group and one node")
	}
	if _, ok := p.spec.Params["kind"]; !ok && n.Group == GroupHolder {
		// The holder's group cut from the lock's nodes: what aiming at the holder is for.
		n.Kinds = []string{PartClientMajority}
	}
	if err := n.checkHolderGroup(); err != nil {
		return nil, err
	}
	for _, k := range n.Kinds {
		if len(env.Nodes) < partitionMinNodes(k) {
			return nil, fmt.Errorf("kind=%s needs at least %d nodes, the cluster has %d: use kind=%s", k, partitionMinNodes(k), len(env.Nodes), PartClientMajority)
		}
	}
	return n, nil
}

// checkHolderGroup refuses group=holder where no group is cut: the peers' paths, and kinds that cut
// every group (isolate, bridge, halves).
func (n *Partition) checkHolderGroup() error {
	if n.Group != GroupHolder {
		return nil
	}
	if n.Peers {
		return fmt.Errorf("group=holder cuts a client group, paths=peers none: drop one of them")
	}
	if n.Target != "" {
		return nil
	}
	for _, k := range n.Kinds {
		if k != PartClientMinority && k != PartClientMajority && k != PartClientAll {
			return fmt.Errorf("group=holder needs kind=%s, %s or %s (kind=%s cuts no one group): set kind", PartClientMajority, PartClientMinority, PartClientAll, k)
		}
	}
	return nil
}

// resolved reports whether the cuts of each fault are chosen when it starts.
func (n *Partition) resolved() bool { return n.Target != "" || n.Group == GroupHolder }

// Name implements Nemesis.
func (n *Partition) Name() string { return "partition" }

// Plan implements Nemesis: one partition at a time, each lasting Duration, of a kind drawn from Kinds
// (or, with a role Target or group=holder, cuts Resolve chooses when the fault starts).
func (n *Partition) Plan(rng *rand.Rand, timeLimit time.Duration) []Op {
	if n.resolved() {
		plan := timedPlan(rng, n.Interval, timeLimit, func(at time.Duration) ([]Op, time.Duration) {
			end := at + n.Duration
			return []Op{{At: at, F: "cut", Effect: history.EffectFault}, {At: end, F: "heal", Effect: history.EffectHeal}}, end
		})
		// Drawn after the plan, so that the plan is what it was before group=holder existed.
		n.rng = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		return plan
	}
	return timedPlan(rng, n.Interval, timeLimit, func(at time.Duration) ([]Op, time.Duration) {
		var cuts Cuts
		if n.Peers {
			cuts = peerCuts(PickNodes(rng, n.Nodes, TargetOne), n.Nodes)
		} else {
			cuts = n.draw(rng, n.Kinds[rng.IntN(len(n.Kinds))])
		}
		if len(cuts) == 0 {
			return nil, at
		}
		end := at + n.Duration
		return []Op{opWithCuts(at, "cut", cuts, history.EffectFault), opWithCuts(end, "heal", cuts, history.EffectHeal)}, end
	})
}

// draw picks the cuts of one partition of a kind.
func (n *Partition) draw(rng *rand.Rand, kind string) Cuts {
	cuts := Cuts{}
	group := func() string {
		if n.Group != "" {
			return n.Group
		}
		return n.Groups[rng.IntN(len(n.Groups))]
	}
	others := func(seen []string) []string {
		var out []string
		for _, x := range n.Nodes {
			if !slices.Contains(seen, x) {
				out = append(out, x)
			}
		}
		return out
	}
	switch kind {
	case PartIsolate:
		node := n.Nodes[rng.IntN(len(n.Nodes))]
		for _, g := range n.Groups {
			cuts[g] = []string{node}
		}
	case PartClientMinority:
		cuts[group()] = PickNodes(rng, n.Nodes, TargetMinority)
	case PartClientMajority:
		cuts[group()] = PickNodes(rng, n.Nodes, TargetMajority)
	case PartClientAll:
		cuts[group()] = slices.Clone(n.Nodes)
	case PartBridge:
		perm := rng.Perm(len(n.Nodes))
		q := len(n.Nodes)/2 + 1
		a, b := make([]string, q), make([]string, q)
		for i := range q {
			a[i] = n.Nodes[perm[i]]
			b[i] = n.Nodes[perm[len(perm)-q+i]]
		}
		if len(n.Groups) == 1 {
			// One group cannot see two sides at once; it gets what each side of a bridge sees, a bare
			// majority.
			cuts[n.Groups[0]] = others(a)
			break
		}
		ga, gb := splitHalves(rng, n.Groups)
		for _, g := range ga {
			cuts[g] = others(a)
		}
		for _, g := range gb {
			cuts[g] = others(b)
		}
	case PartHalves:
		na, nb := splitHalves(rng, n.Nodes)
		if len(n.Groups) == 1 {
			cuts[n.Groups[0]] = nb
			break
		}
		ga, gb := splitHalves(rng, n.Groups)
		for _, g := range ga {
			cuts[g] = nb
		}
		for _, g := range gb {
			cuts[g] = na
		}
	}
	for g, ns := range cuts {
		if len(ns) == 0 {
			delete(cuts, g)
		} else {
			slices.Sort(ns)
		}
	}
	return cuts
}

// Resolve implements Resolver for partitions whose cuts are chosen when a fault starts: a role
// target cuts the groups' paths to the nodes with the role right now; group=holder cuts the group
// of a process that holds a lock (see waitForHolder) from the role's nodes, or from the nodes the
// kind draws. A heal takes the same paths as its cut. Planned cuts are returned as they are.
func (n *Partition) Resolve(ctx context.Context, op Op) (Op, error) {
	if len(op.Nodes) > 0 || !n.resolved() {
		return op, nil
	}
	if op.F == "heal" {
		cuts := n.lastCuts
		n.lastCuts = nil
		if len(cuts) == 0 {
			return op, nil // its cut was skipped: no heal without a fault
		}
		if err := n.keepCut(ctx); err != nil {
			n.lastCuts = cuts // the final heal undoes it
			return op, err
		}
		return opWithCuts(op.At, "heal", cuts, op.Effect), nil
	}
	n.lastCuts = nil
	nodes := n.resolveNodes()
	if len(nodes) == 0 {
		return op, nil
	}
	if n.Peers {
		n.lastCuts = peerCuts(nodes, n.Nodes)
		return opWithCuts(op.At, "cut", n.lastCuts, op.Effect), nil
	}
	groups, err := n.resolveGroups(ctx)
	if err != nil || len(groups) == 0 {
		return op, err
	}
	cuts := Cuts{}
	for _, g := range groups {
		cuts[g] = slices.Clone(nodes)
	}
	n.lastCuts, n.cutAt = cuts, time.Now()
	return opWithCuts(op.At, "cut", cuts, op.Effect), nil
}

// keepCut waits, for a group=holder fault whose cut began late (it waited for a grant), until the
// cut has lasted its Duration: a cut shortened by the wait could heal before the holder's lease
// runs out, and test nothing. The next fault then starts late too.
func (n *Partition) keepCut(ctx context.Context) error {
	if n.Group != GroupHolder {
		return nil
	}
	wait := time.Until(n.cutAt.Add(n.Duration))
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("keep the cut: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}

// resolveNodes are the nodes a fault starting now cuts: those with the role Target names, or a
// minority, a majority or every node, by the kind.
func (n *Partition) resolveNodes() []string {
	if n.Target != "" {
		return RoleNodes(n.env, n.Target)
	}
	if n.rng == nil {
		n.rng = rand.New(rand.NewPCG(1, 2))
	}
	kind := n.Kinds[n.rng.IntN(len(n.Kinds))]
	switch kind {
	case PartClientMinority:
		return PickNodes(n.rng, n.Nodes, TargetMinority)
	case PartClientAll:
		return slices.Clone(n.Nodes)
	}
	return PickNodes(n.rng, n.Nodes, TargetMajority)
}

// resolveGroups are the groups a fault starting now cuts: Group, every group, or (group=holder) the
// group of the next process granted a lock within HolderWait, or else of the newest holder now;
// none when nobody holds, and the fault is skipped.
func (n *Partition) resolveGroups(ctx context.Context) ([]string, error) {
	switch n.Group {
	case "":
		return n.Groups, nil
	case GroupHolder:
	default:
		return []string{n.Group}, nil
	}
	h, ok, err := waitForHolder(ctx, n.env.Holders, n.HolderWait, 2*time.Millisecond)
	if err != nil || !ok {
		if err == nil {
			n.env.Log.Info("partition: holder fault skipped, nobody held a lock in time", "wait", n.HolderWait)
		}
		return nil, err
	}
	n.env.Log.Debug("partition: holder targeted", "process", h.Process, "group", h.Group, "key", h.Key)
	return []string{h.Group}, nil
}

// toxics are the toxics a cut path gets in mode.
func partitionToxics(mode string) []links.Toxic {
	cut := func(stream string) links.Toxic {
		return links.Toxic{Name: "partition-" + stream, Type: "timeout", Stream: stream, Attributes: map[string]any{"timeout": 0}}
	}
	switch mode {
	case ModeReset:
		return []links.Toxic{
			{Name: "partition-upstream", Type: "reset_peer", Stream: "upstream", Attributes: map[string]any{"timeout": 0}},
			{Name: "partition-downstream", Type: "reset_peer", Stream: "downstream", Attributes: map[string]any{"timeout": 0}},
		}
	case ModeLoseReply:
		return []links.Toxic{cut("downstream")}
	case ModeStall:
		return links.Stall("partition")
	default:
		return []links.Toxic{cut("upstream"), cut("downstream")}
	}
}

// Apply implements Nemesis.
func (n *Partition) Apply(ctx context.Context, op Op) error {
	verb, cuts, err := splitVerb(op.F)
	if err != nil {
		return err
	}
	var errs []error
	for _, g := range slices.Sorted(maps.Keys(cuts)) {
		for _, node := range cuts[g] {
			switch verb {
			case "cut":
				errs = append(errs, n.toxics.add(g, node, partitionToxics(n.Mode)))
			case "heal":
				errs = append(errs, n.toxics.removeAndReset(ctx, g, node, false))
			default:
				return fmt.Errorf("partition nemesis cannot %q", verb)
			}
		}
	}
	return errors.Join(errs...)
}

// Healing implements Nemesis: heal every path still cut.
func (n *Partition) Healing() []Op {
	cuts := Cuts(n.toxics.inPlace())
	if len(cuts) == 0 {
		return nil
	}
	return []Op{opWithCuts(0, "heal", cuts, history.EffectHeal)}
}
