package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/links"
	"github.com/lockpick-dev/lockpick/systems"
)

// Failover kinds: how the failover nemesis takes the primary away.
const (
	// FailKill kills the primary (SIGKILL) and starts it again after Down: without persistence it
	// comes back empty, and the sentinels, which promoted a replica meanwhile, make it a replica.
	FailKill = "kill"
	// FailPause stops the primary (SIGSTOP) for Down: it wakes as a master with all its keys, which
	// the sentinels replaced meanwhile, until they make it a replica.
	FailPause = "pause"
	// FailIsolate cuts every sentinel's path to the primary for Down, while clients and replicas
	// still reach it: the sentinels promote a replica and for a while two masters serve.
	FailIsolate = "isolate"
	// FailRestart kills the primary and starts it again at once, empty (without persistence),
	// before the sentinels notice: they still trust it, and its replicas resync its empty data.
	FailRestart = "restart"
)

// FailoverKinds lists the failover kinds. On a system whose replica the harness promotes itself
// (postgres: Env.Promoter) the kind is kill: the replica is promoted Detect after the kill.
func FailoverKinds() []string { return []string{FailKill, FailPause, FailIsolate, FailRestart} }

// Failover takes the current primary of a replicated system away so that its sentinels fail it
// over, optionally after stalling replication from it (every replica's link to it holds its data
// back) and waiting for a lease the primary granted in the stall: that lease exists nowhere else, and
// the promoted replica hands the lock out again. Each fault is, in the history:
//
//	stall n2/n1 n3/n1    (the replicas' paths to the primary n1 hold their data; made at a moment
//	                      no node holds a lease, with n1's client writes held: aimStall)
//	kill n1              (or stop, isolate s1/n1 s2/n1 s3/n1, or kill then start at once)
//	start n1             (or cont, rejoin ...), Down later
//	unstall n2/n1 n3/n1
//
// with the roles of the nodes at each moment, and the sentinels' role changes between. Where no
// sentinel promotes a replica (postgres), the nemesis does, as a failover manager would, Detect
// after the kill, keeps the old primary down (fenced), and rebuilds it as the new primary's replica:
//
//	kill pg1
//	promote pg2          (pg_promote(); the clients' paths to pg1 now lead to pg2)
//	start pg1            (Down after the kill: a fresh base backup of pg2, a replica of it)
type Failover struct {
	Env   Env
	Kinds []string
	// Stall is the share of faults preceded by a replication stall.
	Stall float64
	// Wait bounds how long a fault waits for a lease on the primary; none in time skips the fault.
	Wait time.Duration
	// Down is how long the primary stays away (killed, stopped or isolated).
	Down     time.Duration
	Interval time.Duration
	// Detect is, where the nemesis promotes, how long after the kill it does.
	Detect time.Duration
	// promotes: no sentinel promotes a replica here (postgres), so the nemesis does (Env.Promoter).
	promotes bool

	toxics pathCutter
	mu     sync.Mutex
	hit    string          // the primary the fault in progress took away; "" when skipped
	killed map[string]bool // nodes killed and not yet started
	// killedAt is when each node was last killed: a planned start keeps it down Down from then, as a
	// kill that waited for its lease may come after the start's planned time.
	killedAt map[string]time.Time
	paused   map[string]bool
	// died are nodes killed since the links to them were stalled: those links' connections are
	// dead at the far end, and removing the stall resets them.
	died map[string]bool
	// restarts are the times of the planned restarts (a kill and a start at once).
	restarts map[time.Duration]bool
	// promoting is the replica the promotion in progress promotes; fenced are the old primaries
	// promotions replaced, kept down.
	promoting string
	fenced    map[string]string // old primary -> the replica promoted in its place
	// held is the hold on the primary's client writes the stall in progress was aimed with, from its
	// Resolve until its Apply has put the stall in place; stallNote says, on the stall's events, how
	// it was aimed.
	held      *stallHold
	stallNote string
}

// failoverParams are the failover nemesis's parameters.
func failoverParams() []Param {
	return []Param{
		{Name: "kind", Type: TypeChoices, Values: FailoverKinds(), Default: FailKill, Help: "how the primary is taken away",
			Needs: map[string]Capability{FailPause: NodeSignals}},
		{Name: "stall", Type: TypeShare, Default: "1", Help: "the share of faults that first stall replication from the primary"},
		{Name: "wait", Type: TypeDuration, Default: "2×TTL", Help: "how long a stalled fault waits for a lease the primary granted"},
		{Name: "down", Type: TypeDuration, Default: "5s", Help: "how long the old primary stays away"},
		{Name: "detect", Type: TypeDuration, Default: "1s", Help: "postgres: how long after the kill the replica is promoted (a failover manager's detection time)"},
		intervalParam(),
	}
}

func buildFailover(env Env, p *Params) (Nemesis, error) {
	f := &Failover{Env: env, toxics: serverPaths(env, ModeDrop), killed: map[string]bool{}, killedAt: map[string]time.Time{}, paused: map[string]bool{}, died: map[string]bool{}, restarts: map[time.Duration]bool{}, fenced: map[string]string{}}
	f.Kinds = p.Choices("kind", []string{FailKill}, FailoverKinds()...)
	f.Stall = p.Share("stall", 1)
	f.Wait = p.Duration("wait", 2*env.TTL)
	f.Down = p.Duration("down", 5*time.Second)
	f.Interval = p.Duration("interval", env.Interval)
	if f.Interval <= 0 || f.Down <= 0 {
		return nil, fmt.Errorf("interval and down must be positive")
	}
	f.Detect = p.Duration("detect", time.Second)
	if err := CheckTarget(env, TargetPrimary); err != nil {
		return nil, fmt.Errorf("needs a system with a primary and replicas (redis-sentinel, postgres --replicas 1): %w", err)
	}
	if len(RoleNodes(env, TargetReplicas)) == 0 {
		return nil, errors.New("needs a replica to promote: add --replicas 1")
	}
	f.promotes = env.Promoter != nil || len(RoleNodes(env, TargetSentinels)) == 0
	if f.promotes && (len(f.Kinds) != 1 || f.Kinds[0] != FailKill) {
		return nil, fmt.Errorf("kind %v: where lockpick promotes the replica itself (postgres) the failover kind is kill: drop kind", f.Kinds)
	}
	if f.Detect < 0 {
		return nil, fmt.Errorf("detect must not be negative, got %v", f.Detect)
	}
	return f, nil
}

// Name implements Nemesis.
func (f *Failover) Name() string { return "failover" }

// Plan implements Nemesis. Targets are resolved when each operation runs: the primary then.
func (f *Failover) Plan(rng *rand.Rand, timeLimit time.Duration) []Op {
	plan := timedPlan(rng, f.Interval, timeLimit, func(at time.Duration) ([]Op, time.Duration) {
		kind := f.Kinds[rng.IntN(len(f.Kinds))]
		stall := rng.Float64() < f.Stall
		var ops []Op
		if stall {
			ops = append(ops, Op{At: at, F: "stall", Effect: history.EffectFault})
		}
		take := at + time.Millisecond
		back := take + f.Wait + f.Down
		switch kind {
		case FailKill:
			ops = append(ops, Op{At: take, F: "kill", Effect: history.EffectFault})
			if f.promotes {
				ops = append(ops, Op{At: take + f.Detect, F: "promote", Effect: history.EffectFault})
			}
			ops = append(ops, Op{At: back, F: "start", Effect: history.EffectHeal})
		case FailPause:
			ops = append(ops, Op{At: take, F: "stop", Effect: history.EffectFault}, Op{At: back, F: "cont", Effect: history.EffectHeal})
		case FailIsolate:
			ops = append(ops, Op{At: take, F: "isolate", Effect: history.EffectFault}, Op{At: back, F: "rejoin", Effect: history.EffectHeal})
		case FailRestart:
			ops = append(ops, Op{At: take, F: "kill", Effect: history.EffectFault}, Op{At: take, F: "start", Effect: history.EffectHeal})
			f.mu.Lock()
			f.restarts[take] = true
			f.mu.Unlock()
		}
		if stall {
			ops = append(ops, Op{At: back + time.Millisecond, F: "unstall", Effect: history.EffectHeal})
		}
		return ops, back + time.Millisecond
	})
	sort.SliceStable(plan, func(i, j int) bool { return plan[i].At < plan[j].At })
	return plan
}

// Resolve implements Resolver.
func (f *Failover) Resolve(ctx context.Context, op Op) (Op, error) {
	primary := RoleNodes(f.Env, TargetPrimary)
	if len(primary) != 1 {
		return op, fmt.Errorf("the system names %d primaries (%v): nothing to fail over", len(primary), primary)
	}
	p := primary[0]
	switch op.F {
	case "stall":
		// A lease the replicas already have would outlive the failover on the promoted one and
		// keep the next client out: the stall waits for a moment no node holds a lease, and holds
		// the primary's client writes from it until Apply has stalled replication (aimStall).
		cuts := Cuts{}
		for _, r := range RoleNodes(f.Env, TargetReplicas) {
			cuts[r] = []string{p}
		}
		h, note := f.aimStall(ctx, p)
		f.mu.Lock()
		f.held, f.stallNote = h, note
		f.mu.Unlock()
		return opWithCuts(op.At, "stall", cuts, op.Effect), nil
	case "unstall":
		return f.inPlace(op, "unstall", func(from string) bool { return !slices.Contains(RoleNodes(f.Env, TargetSentinels), from) }), nil
	case "kill", "stop", "isolate":
		if op.Effect == history.EffectFault {
			return f.takeAway(ctx, op, p)
		}
	case "rejoin":
		return f.inPlace(op, "rejoin", func(from string) bool { return slices.Contains(RoleNodes(f.Env, TargetSentinels), from) }), nil
	case "promote":
		return f.resolvePromote(ctx, op), nil
	}
	// start and cont bring back what the fault in progress took away.
	f.mu.Lock()
	defer f.mu.Unlock()
	op.Nodes = nil
	if f.hit != "" {
		op.Nodes = []string{f.hit}
	}
	return op, nil
}

// resolvePromote aims a promotion at a replica of the primary the kill took away, Detect after the
// kill (which may have come late, after waiting for a lease), so that the history records the
// promotion when it happens; none when the kill was skipped.
func (f *Failover) resolvePromote(ctx context.Context, op Op) Op {
	f.mu.Lock()
	wait := f.Detect - time.Since(f.killedAt[f.hit])
	hit := f.hit
	f.mu.Unlock()
	if hit != "" && wait > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	op.Nodes, f.promoting = nil, ""
	if f.hit == "" {
		return op
	}
	if replicas := RoleNodes(f.Env, TargetReplicas); len(replicas) > 0 {
		f.promoting = replicas[0]
		op.Nodes = []string{replicas[0]}
	}
	return op
}

// takeAway waits for a lease the primary p granted (in the stall, when replication is stalled, so
// that no replica has it) and aims the fault at p; with no such lease in time the fault is skipped.
func (f *Failover) takeAway(ctx context.Context, op Op, p string) (Op, error) {
	f.mu.Lock()
	f.hit = ""
	f.mu.Unlock()
	if f.promotes && len(RoleNodes(f.Env, TargetReplicas)) == 0 {
		// An earlier failover promoted the only replica and fenced the old primary.
		f.Env.Log.Info("failover: fault skipped: no replica left to promote", "primary", p)
		op.Nodes = nil
		return op, nil
	}
	stalled := len(f.toxics.inPlace()) > 0
	granted := func(held []systems.Lease) bool { return len(held) > 0 }
	if stalled {
		granted = func(held []systems.Lease) bool { return len(onlyOn(held, p)) > 0 }
	}
	f.mu.Lock()
	restart := f.restarts[op.At]
	f.mu.Unlock()
	// Where the nemesis promotes (postgres), the promotion comes Detect after the kill: a hold hit
	// in its last moments would end before the promoted replica grants anything, so the kill too
	// waits for a fresh grant.
	if (restart || f.promotes) && f.Env.Probe != nil && len(f.Env.Keys) > 0 {
		// A restart is over at once: it breaks the lock only if the holder still works when the
		// next client is granted, so it waits for a fresh grant, with all its work ahead (a hold
		// hit in its last moments ends before anyone else gets in). None in time: any lease.
		granted = f.freshLease(ctx, p, granted)
	}
	if f.Env.Probe != nil && len(f.Env.Keys) > 0 {
		if !f.waitForLease(ctx, p, granted) {
			f.Env.Log.Info("failover: fault skipped: no lease on the primary in time", "primary", p, "wait", f.Wait, "stalled", stalled)
			op.Nodes = nil
			return op, ctx.Err()
		}
	}
	f.mu.Lock()
	f.hit = p
	f.mu.Unlock()
	if op.F == "isolate" {
		cuts := Cuts{}
		for _, s := range RoleNodes(f.Env, TargetSentinels) {
			cuts[s] = []string{p}
		}
		return opWithCuts(op.At, "isolate", cuts, op.Effect), nil
	}
	op.Nodes = []string{p}
	return op, nil
}

// freshLease waits for a fresh grant: one the history records after the call (a client got it: a
// lease written but still waiting on its WAIT is not yet a hold), or without that view a lease the
// primary p did not hold at the call. It waits up to half the shorter of Wait and the TTL (a fresh
// grant comes within about one hold, and the lease held at the call must still be there for the
// fallback); where the nemesis promotes, a whole one: the promotion comes Detect after the kill, and
// a hold granted just before the call outlasted half a TTL and ended before the promoted replica
// granted anything (PgBouncer's failover row, seed 2). Then it returns a test that takes the lease held
// now at once; when none came, ok itself.
func (f *Failover) freshLease(ctx context.Context, p string, ok func(held []systems.Lease) bool) func([]systems.Lease) bool {
	now := func([]systems.Lease) bool { return true }
	wait := min(f.Wait, f.Env.TTL)
	if !f.promotes {
		wait /= 2
	}
	if f.Env.Holders != nil {
		began := time.Now()
		h, found, err := waitForHolder(ctx, f.Env.Holders, wait, 2*time.Millisecond)
		if err == nil && found && !h.Since.Before(began) {
			return now
		}
		return ok
	}
	qctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	before := map[string]bool{}
	for _, l := range f.Env.Probe.Leases(qctx, f.Env.Keys) {
		before[l.Key+"\x00"+l.Value] = true
	}
	cancel()
	fresh := func(held []systems.Lease) bool {
		var out []systems.Lease
		for _, l := range held {
			if !before[l.Key+"\x00"+l.Value] {
				out = append(out, l)
			}
		}
		return ok(out)
	}
	if f.waitForLeaseWithin(ctx, p, wait, fresh) {
		return now
	}
	return ok
}

// waitForLease polls the lock's probe until ok accepts the leases the primary holds, or Wait
// passes. Without a probe there is nothing to wait for.
func (f *Failover) waitForLease(ctx context.Context, primary string, ok func(held []systems.Lease) bool) bool {
	return f.waitForLeaseWithin(ctx, primary, f.Wait, ok)
}

// waitForLeaseWithin is waitForLease bounded by wait.
func (f *Failover) waitForLeaseWithin(ctx context.Context, primary string, wait time.Duration, ok func(held []systems.Lease) bool) bool {
	if f.Env.Probe == nil || len(f.Env.Keys) == 0 {
		return true
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		qctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		leases := f.Env.Probe.Leases(qctx, f.Env.Keys)
		failed := qctx.Err() != nil
		cancel()
		var held []systems.Lease
		for _, l := range leases {
			if slices.Contains(l.Nodes, primary) {
				held = append(held, l)
			}
		}
		if !failed && ok(heldWithOthers(held, leases)) {
			return true
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Millisecond):
		}
	}
	return false
}

// heldWithOthers returns the leases the primary holds, with the nodes that hold their keys under
// another lease added to their Nodes: a key a replica holds under an older lease is present there,
// and would keep the next client out after the replica's promotion.
func heldWithOthers(held, all []systems.Lease) []systems.Lease {
	out := make([]systems.Lease, len(held))
	for i, h := range held {
		out[i] = systems.Lease{Key: h.Key, Value: h.Value, Nodes: slices.Clone(h.Nodes)}
		for _, o := range all {
			if o.Key == h.Key && o.Value != h.Value {
				out[i].Nodes = append(out[i].Nodes, o.Nodes...)
			}
		}
	}
	return out
}

// onlyOn keeps the leases whose key is present on node p alone.
func onlyOn(held []systems.Lease, p string) []systems.Lease {
	var out []systems.Lease
	for _, l := range held {
		if len(l.Nodes) == 1 && l.Nodes[0] == p {
			out = append(out, l)
		}
	}
	return out
}

// inPlace is a heal of the links this nemesis cut whose source keep accepts.
func (f *Failover) inPlace(op Op, verb string, keep func(from string) bool) Op {
	cuts := Cuts{}
	for from, to := range f.toxics.inPlace() {
		if keep(from) {
			cuts[from] = to
		}
	}
	return opWithCuts(op.At, verb, cuts, op.Effect)
}

// Apply implements Nemesis.
func (f *Failover) Apply(ctx context.Context, op Op) error {
	verb, cuts, err := splitVerb(op.F)
	if err != nil {
		return err
	}
	var errs []error
	switch verb {
	case "stall", "isolate":
		if verb == "stall" {
			f.mu.Lock()
			clear(f.died) // a new fault: no node has died behind these links yet
			f.mu.Unlock()
		}
		for _, from := range slices.Sorted(maps.Keys(cuts)) {
			for _, to := range cuts[from] {
				errs = append(errs, f.toxics.add(from, to, links.Stall(verb)))
			}
		}
		if verb == "stall" {
			f.endHold()
		}
	case "unstall", "rejoin", "heal":
		f.mu.Lock()
		died := maps.Clone(f.died)
		f.mu.Unlock()
		for _, from := range slices.Sorted(maps.Keys(cuts)) {
			for _, to := range cuts[from] {
				errs = append(errs, f.toxics.removeAndReset(ctx, from, to, died[to] || died[from]))
			}
		}
		if len(f.toxics.inPlace()) == 0 {
			f.mu.Lock()
			clear(f.died)
			f.mu.Unlock()
		}
	case "promote":
		errs = append(errs, f.promote(ctx, op))
	case "kill", "start", "stop", "cont":
		if verb == "start" {
			f.keepDown(ctx, op)
		}
		for _, n := range op.Nodes {
			f.mu.Lock()
			primary, fenced := f.fenced[n]
			f.mu.Unlock()
			if verb == "start" && fenced {
				errs = append(errs, f.rejoin(ctx, n, primary))
				continue
			}
			errs = append(errs, f.process(ctx, verb, n))
		}
	default:
		return fmt.Errorf("failover nemesis cannot %q", verb)
	}
	return errors.Join(errs...)
}

// endHold lets the client writes the stall's aim held go on, now that the stall is in place, and
// adds to the stall's note how long they were held, or that the hold ended before.
func (f *Failover) endHold() {
	f.mu.Lock()
	h := f.held
	f.held = nil
	f.mu.Unlock()
	if h == nil {
		return
	}
	held, err := h.end()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.Env.Log.Warn("failover: stall: "+err.Error(), "primary", h.node)
		f.stallNote += "; " + err.Error()
		return
	}
	f.stallNote += fmt.Sprintf("; writes held %v", held.Round(10*time.Microsecond))
	if h.steps > 0 {
		f.stallNote += fmt.Sprintf(", stepped %d times (the held writes ran, the release among them, then were held again)", h.steps)
	}
}

// Annotate implements Annotator: a stall's events say how it was aimed (its note), the completion
// how long the primary's client writes were held.
func (f *Failover) Annotate(_ context.Context, op Op, ev *history.Event, _ error) {
	if verb, _, _ := strings.Cut(op.F, " "); verb != "stall" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ev.Note = f.stallNote
}

// promote promotes the replica op names in place of the primary the kill took away, and keeps
// that primary down.
func (f *Failover) promote(ctx context.Context, op Op) error {
	f.mu.Lock()
	old, replica := f.hit, f.promoting
	f.mu.Unlock()
	if len(op.Nodes) == 0 || old == "" || replica == "" {
		return nil
	}
	if f.Env.Promoter == nil {
		return fmt.Errorf("failover: the system cannot promote %s itself, and no sentinel does", replica)
	}
	did, err := f.Env.Promoter.Promote(ctx, old, replica)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	f.Env.Log.Info("failover: "+did, "old", old, "promoted", replica)
	f.mu.Lock()
	f.fenced[old] = replica
	f.mu.Unlock()
	return nil
}

// rejoin starts the fenced old primary n again as a replica of the primary promoted in its place.
func (f *Failover) rejoin(ctx context.Context, n, primary string) error {
	did, err := f.Env.Promoter.Rejoin(ctx, n, primary)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	f.Env.Log.Info("failover: "+did, "node", n)
	f.mu.Lock()
	delete(f.killed, n)
	delete(f.fenced, n)
	f.mu.Unlock()
	return nil
}

// keepDown waits, before a planned start of a killed primary (not a restart's, not the final
// heal's), until it has been down Down: without it a kill that waited long for a lease would be
// followed at once by the start planned for its time, a restart without data instead of a failover.
func (f *Failover) keepDown(ctx context.Context, op Op) {
	f.mu.Lock()
	if op.At == 0 || f.restarts[op.At] {
		f.mu.Unlock()
		return
	}
	var wait time.Duration
	for _, n := range op.Nodes {
		if at, ok := f.killedAt[n]; ok && f.killed[n] {
			wait = max(wait, f.Down-time.Since(at))
		}
	}
	f.mu.Unlock()
	if wait > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// process kills, starts, stops or continues node n.
func (f *Failover) process(ctx context.Context, verb, n string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch verb {
	case "kill":
		f.killed[n] = true
		f.killedAt[n] = time.Now()
		f.died[n] = true
		delete(f.paused, n) // a killed process is no longer stopped
		return f.Env.Cluster.Kill(n)
	case "start":
		if f.Env.Cluster.Running(n) {
			delete(f.killed, n)
			return nil
		}
		err := f.Env.Cluster.Start(ctx, n)
		if err == nil {
			delete(f.killed, n)
		}
		return err
	case "stop":
		f.paused[n] = true
		return f.Env.Cluster.Signal(n, syscall.SIGSTOP)
	default:
		if !f.Env.Cluster.Running(n) {
			delete(f.paused, n)
			return nil
		}
		err := f.Env.Cluster.Signal(n, syscall.SIGCONT)
		if err == nil {
			delete(f.paused, n)
		}
		return err
	}
}

// Healing implements Nemesis: continue what is stopped, start what is killed, and remove every
// stall and isolation.
func (f *Failover) Healing() []Op {
	f.mu.Lock()
	var ops []Op
	if len(f.paused) > 0 {
		ops = append(ops, Op{F: "cont", Nodes: slices.Sorted(maps.Keys(f.paused)), Effect: history.EffectHeal})
	}
	if len(f.killed) > 0 {
		ops = append(ops, Op{F: "start", Nodes: slices.Sorted(maps.Keys(f.killed)), Effect: history.EffectHeal})
	}
	f.mu.Unlock()
	if cuts := Cuts(f.toxics.inPlace()); len(cuts) > 0 {
		ops = append(ops, opWithCuts(0, "heal", cuts, history.EffectHeal))
	}
	return ops
}
