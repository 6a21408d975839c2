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

// Clock operation names.
const (
	FBumpForward = "bump-forward"
	FBumpBack    = "bump-back"
	FStrobe      = "strobe"
	FRunFast     = "run-fast"
	FReset       = "reset"
)

// Jump kinds of the clock nemesis's jump parameter.
const (
	JumpForward = "forward"
	JumpBack    = "back"
	JumpStrobe  = "strobe"
	// JumpFast is no jump: the clock runs fast by Rate for Duration, as a drifting oscillator does.
	// Keys then expire early by Rate/(1+Rate) of their TTL; a lock's drift allowance exists to
	// cover exactly this, so a rate within it must leave a correct lock safe.
	JumpFast = "fast"
)

// Reset kinds: how a clock that is behind is brought back to the real time.
const (
	// ResetStep sets the offset to zero at once. For a clock that is behind this is itself a forward
	// jump: every key set while it was behind expires that much early.
	ResetStep = "step"
	// ResetSlew lets a clock that is behind run fast by SlewRate until it has caught up, as NTP does;
	// a rate within the lock's drift allowance keeps every lease safe. Clocks ahead are stepped back,
	// which only makes keys live longer.
	ResetSlew = "slew"
	// ResetQuiet steps a clock that is behind back to the real time only at a moment it holds no lock
	// key, with every client's writes held back (CLIENT PAUSE WRITE) while it looks and steps: no key
	// written while the clock was behind survives the step, so the step shortens no lease. It is how
	// an operator fixes a clock safely, and what lets a scenario show the jump back on its own.
	ResetQuiet = "quiet"
)

// Clock sources: whose clock a fault moves.
const (
	// SourceShim moves a node's clock as its clock shim reads it: the node's process alone.
	SourceShim = "shim"
	// SourceHost moves the real clock of the host a node runs on (--backend ssh): every process
	// there, and every node on a host that shares its kernel.
	SourceHost = "host"
)

// Clock moves node wall clocks through the clock shim, or the real clocks of their hosts: a jump
// forward expires keys early on the nodes it hits, a jump back keeps them late, a strobe flips
// between the real time and a jump forward. Every fault is followed by a reset.
type Clock struct {
	Clocks Clocks
	// Source is SourceShim or SourceHost; host is Env.HostClocks with SourceHost.
	Source string
	host   RealClocks
	Env    Env
	Nodes  []string
	// Target is a target kind (TargetKinds); the holder kinds are resolved when the fault starts.
	Target string
	// Jumps are drawn among for each fault.
	Jumps []string
	// Offset is the size of a jump; Duration how long it lasts before the reset; Interval the mean
	// time between faults; Period the strobe's half period.
	Offset, Duration, Interval, Period time.Duration
	// Reset is ResetStep or ResetSlew; SlewRate the share by which a slewing clock runs fast.
	Reset    string
	SlewRate float64
	// Rate is how much faster than real time a clock with JumpFast runs (0.005: 0.5% fast).
	Rate float64
	// TargetWait bounds how long a lock-aware fault waits for the lease it wants.
	TargetWait time.Duration

	resolveRng *rand.Rand
	shifted    map[string]time.Duration // node -> offset this nemesis left it at
}

// clockParams are the clock nemesis's parameters.
func clockParams() []Param {
	return []Param{
		targetParam(TargetKinds(), TargetOne),
		{Name: "jump", Type: TypeChoices, Values: []string{JumpForward, JumpBack, JumpStrobe, JumpFast}, Default: "forward+back", Help: "what a fault does to the clock"},
		{Name: "rate", Type: TypeShare, Default: "0.005", Help: "with jump=fast, how much faster than real time the clock runs"},
		{Name: "offset", Type: TypeDuration, Default: "2×TTL", Help: "the size of a jump"},
		durationParam("TTL", "how long a jump lasts before the reset"),
		intervalParam(),
		{Name: "period", Type: TypeDuration, Default: "10ms", Help: "the strobe's half period"},
		{Name: "reset", Type: TypeChoice, Values: []string{ResetStep, ResetSlew, ResetQuiet}, Default: ResetStep,
			Help:  "how a clock that is behind is brought back: at once, slewed, or stepped when it holds no key",
			Needs: map[string]Capability{ResetQuiet: WriteHolds | Links}},
		{Name: "slew-rate", Type: TypeShare, Default: "0.005", Help: "with reset=slew, how much faster a clock that is behind runs"},
		waitParam("max(--interval/2, TTL)"),
		{Name: "source", Type: TypeChoice, Values: []string{SourceShim, SourceHost}, Default: SourceShim,
			Help:  "whose clock moves: the node's through the clock shim, or the real clock of its host (--backend ssh with --allow-host-clock: docs/ssh.md)",
			Needs: map[string]Capability{SourceHost: HostClocks}, Drops: map[string]Capability{SourceHost: NodeClocks}},
	}
}

func buildClock(env Env, p *Params) (Nemesis, error) {
	c := &Clock{Clocks: env.Clocks, Env: env, Nodes: env.Nodes}
	c.Target = p.Choice("target", TargetOne, TargetKinds()...)
	c.Jumps = p.Choices("jump", []string{JumpForward, JumpBack}, JumpForward, JumpBack, JumpStrobe, JumpFast)
	c.Rate = p.Share("rate", 0.005)
	c.Offset = p.Duration("offset", 2*env.TTL)
	c.Duration = p.Duration("duration", env.TTL)
	c.Interval = p.Duration("interval", env.Interval)
	c.Period = p.Duration("period", 10*time.Millisecond)
	c.Reset = p.Choice("reset", ResetStep, ResetStep, ResetSlew, ResetQuiet)
	c.SlewRate = p.Share("slew-rate", 0.005)
	c.TargetWait = p.Duration("wait", max(env.Interval/2, env.TTL))
	c.Source = p.Choice("source", SourceShim, SourceShim, SourceHost)
	if err := c.useHost(env); err != nil {
		return nil, err
	}
	switch {
	case c.Offset <= 0:
		return nil, fmt.Errorf("offset must be positive (for example offset=4s)")
	case c.Duration <= 0:
		return nil, fmt.Errorf("duration must be positive (for example duration=2s)")
	case c.Interval <= 0:
		return nil, fmt.Errorf("interval must be positive (for example interval=5s)")
	case c.Period <= 0:
		return nil, fmt.Errorf("period must be positive (for example period=10ms)")
	case slices.Contains(c.Jumps, JumpFast) && c.Rate <= 0:
		return nil, fmt.Errorf("rate must be above 0 with jump=fast (for example rate=0.005)")
	case c.Reset == ResetSlew && c.SlewRate <= 0:
		return nil, fmt.Errorf("slew-rate must be above 0 with reset=slew (for example slew-rate=0.005)")
	}
	return c, CheckTarget(env, c.Target)
}

// useHost makes a clock of source=host move the hosts' clocks, and refuses what it cannot do
// there: a strobe's steps every period and a slewing reset's every millisecond are round trips
// over SSH, which neither period nor slew would survive.
func (c *Clock) useHost(env Env) error {
	if c.Source != SourceHost {
		return nil
	}
	if slices.Contains(c.Jumps, JumpStrobe) {
		return fmt.Errorf("jump=strobe with source=host: a strobe steps the clock every period, and a host's clock is a round trip over SSH away: use jump=forward, back or fast")
	}
	if c.Reset == ResetSlew {
		return fmt.Errorf("reset=slew with source=host: the slew moves the clock every millisecond, a round trip over SSH each: use reset=step or quiet")
	}
	c.host = env.HostClocks
	c.Clocks = c.host // nil when the hosts' clocks may not move: Apply says why
	return nil
}

// Name implements Nemesis.
func (c *Clock) Name() string { return "clock" }

// healTime is how long the reset after a jump takes.
func (c *Clock) healTime(jump string) time.Duration {
	if jump == JumpBack && c.Reset == ResetSlew {
		return time.Duration(float64(c.Offset)/c.SlewRate) + 10*time.Millisecond
	}
	if jump == JumpBack && c.Reset == ResetQuiet {
		return quietLook + 2*c.Env.TTL + time.Second + 10*time.Millisecond
	}
	return 10 * time.Millisecond
}

// Plan implements Nemesis: a fault, its reset Duration later, and the next fault only once the
// reset is done. Lock-aware faults leave TargetWait for their lease to appear before the reset.
func (c *Clock) Plan(rng *rand.Rand, timeLimit time.Duration) []Op {
	var plan []Op
	t := jitter(rng, c.Interval)
	for {
		jump := c.Jumps[rng.IntN(len(c.Jumps))]
		var nodes []string
		if !IsResolved(c.Target) {
			nodes = PickNodes(rng, c.Nodes, c.Target)
		}
		reset := t + c.Duration
		if IsLockAware(c.Target) {
			reset += c.TargetWait
		}
		done := reset + c.healTime(jump)
		if done >= timeLimit {
			break
		}
		plan = append(plan,
			Op{At: t, F: jumpOp(jump), Nodes: nodes, Effect: history.EffectFault},
			Op{At: reset, F: FReset, Nodes: nodes, Effect: history.EffectHeal})
		t = max(t+jitter(rng, c.Interval), done+100*time.Millisecond)
	}
	// Drawn after the plan, so the plan does not depend on it; lock-aware targets pick from it.
	c.resolveRng = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	return plan
}

func jumpOp(jump string) string {
	switch jump {
	case JumpBack:
		return FBumpBack
	case JumpStrobe:
		return FStrobe
	case JumpFast:
		return FRunFast
	}
	return FBumpForward
}

// Resolve implements Resolver. A lock-aware fault waits for a lease of the shape its target needs;
// when none appears within TargetWait the fault is skipped. A reset resolves to the nodes this
// nemesis actually shifted.
func (c *Clock) Resolve(ctx context.Context, op Op) (Op, error) {
	op, err := c.resolve(ctx, op)
	if err != nil || c.host == nil || op.F == FReset {
		return op, err
	}
	// Hosts that share a kernel share one clock: the fault moves every node on them, and says so.
	var kin []string
	for _, n := range op.Nodes {
		for _, k := range c.host.Kin(n) {
			if !slices.Contains(kin, k) {
				kin = append(kin, k)
			}
		}
	}
	slices.Sort(kin)
	op.Nodes = kin
	return op, nil
}

// resolve is Resolve for the nodes the target names.
func (c *Clock) resolve(ctx context.Context, op Op) (Op, error) {
	if op.F == FReset {
		var nodes []string
		for _, n := range slices.Sorted(maps.Keys(c.shifted)) {
			if len(op.Nodes) == 0 || slices.Contains(op.Nodes, n) {
				nodes = append(nodes, n)
			}
		}
		op.Nodes = nodes
		// A step back to the real time moves a clock that is behind forward: the history says so.
		if c.Reset == ResetStep && slices.ContainsFunc(nodes, func(n string) bool { return c.shifted[n] < 0 }) {
			op.F = history.FResetForward
		}
		return op, nil
	}
	if IsRoleTarget(c.Target) {
		op.Nodes = RoleNodes(c.Env, c.Target)
		return op, nil
	}
	if !IsLockAware(c.Target) {
		return op, nil
	}
	if c.resolveRng == nil {
		c.resolveRng = rand.New(rand.NewPCG(1, 2))
	}
	nodes, lease, err := WaitForLeaseTarget(ctx, c.Env, c.resolveRng, c.Target, c.TargetWait, 2*time.Millisecond)
	if errors.Is(err, ErrNoLease) {
		c.Env.Log.Info("clock: fault skipped", "op", op.F, "target", c.Target, "reason", err)
		op.Nodes = nil
		return op, nil
	}
	if err != nil {
		return op, err
	}
	c.Env.Log.Debug("clock: lease targeted", "key", lease.Key, "value", lease.Value, "holders", lease.Nodes, "hit", nodes)
	op.Nodes = nodes
	return op, nil
}

// target is the offset a fault operation sets.
func (c *Clock) target(f string) time.Duration {
	if f == FBumpBack {
		return -c.Offset
	}
	if f == FReset || f == history.FResetForward {
		return 0
	}
	if f == FRunFast {
		return time.Duration(float64(c.Duration) * c.Rate) // where the clock will have got to
	}
	return c.Offset
}

// Apply implements Nemesis. A strobe runs for Duration before Apply returns.
func (c *Clock) Apply(ctx context.Context, op Op) error {
	if c.Clocks == nil && c.Source == SourceHost {
		return errors.New("the hosts' clocks may not move: source=host needs --backend ssh and --allow-host-clock")
	}
	if c.Clocks == nil {
		return errors.New("the nodes run without the clock shim: the clock nemesis cannot move their clocks")
	}
	if c.shifted == nil {
		c.shifted = map[string]time.Duration{}
	}
	switch op.F {
	case FBumpForward, FBumpBack:
		return c.set(op.Nodes, c.target(op.F))
	case FStrobe:
		return c.strobe(ctx, op.Nodes)
	case FRunFast:
		if c.host != nil {
			return c.hostDrift(ctx, op.Nodes)
		}
		return c.runFast(ctx, op.Nodes)
	case FReset, history.FResetForward:
		return c.reset(ctx, op.Nodes)
	}
	return fmt.Errorf("clock nemesis cannot %q", op.F)
}

func (c *Clock) set(nodes []string, off time.Duration) error {
	var errs []error
	for _, n := range nodes {
		if err := c.Clocks.SetClockOffset(n, off); err != nil {
			errs = append(errs, err)
			continue
		}
		if off == 0 {
			delete(c.shifted, n)
		} else {
			c.shifted[n] = off
		}
	}
	return errors.Join(errs...)
}

// strobe flips the nodes between +Offset and the real time every Period for Duration.
func (c *Clock) strobe(ctx context.Context, nodes []string) error {
	end := time.Now().Add(c.Duration)
	tick := time.NewTicker(c.Period)
	defer tick.Stop()
	ahead := true
	for {
		off := time.Duration(0)
		if ahead {
			off = c.Offset
		}
		if err := c.set(nodes, off); err != nil {
			return err
		}
		ahead = !ahead
		if !time.Now().Before(end) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// runFast makes the nodes' clocks run fast by Rate for Duration, moving their offsets every
// millisecond (as a slewing reset does), then leaves them ahead until the reset steps them back,
// which only makes keys live longer.
func (c *Clock) runFast(ctx context.Context, nodes []string) error {
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		elapsed := min(time.Since(start), c.Duration)
		if err := c.set(nodes, time.Duration(float64(elapsed)*c.Rate)); err != nil {
			return err
		}
		if elapsed >= c.Duration {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// hostDrift makes the nodes' host clocks run fast by Rate (the kernel's tick and frequency) for
// Duration, then at the frequency they had, leaving them ahead until the reset steps them back.
func (c *Clock) hostDrift(ctx context.Context, nodes []string) error {
	for _, n := range nodes {
		c.shifted[n] = 0 // the heal resets it, whatever happens next
	}
	stop := func() error {
		var errs []error
		for _, n := range nodes {
			errs = append(errs, c.host.SetClockRate(n, 0))
			if off, err := c.host.ClockOffset(n); err == nil {
				c.shifted[n] = off
			}
		}
		return errors.Join(errs...)
	}
	for _, n := range nodes {
		if err := c.host.SetClockRate(n, c.Rate); err != nil {
			return errors.Join(err, stop())
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(c.Duration):
	}
	return errors.Join(ctx.Err(), stop())
}

// reset brings the nodes back to the real time: a step, or for clocks behind with ResetSlew a run
// at 1+SlewRate speed until they have caught up.
func (c *Clock) reset(ctx context.Context, nodes []string) error {
	var behind []string
	var step []string
	if c.Reset == ResetQuiet {
		var errs []error
		for _, n := range nodes {
			if c.shifted[n] < 0 {
				errs = append(errs, c.quietReset(ctx, n))
			} else {
				step = append(step, n)
			}
		}
		return errors.Join(append(errs, c.set(step, 0))...)
	}
	for _, n := range nodes {
		if c.Reset == ResetSlew && c.shifted[n] < 0 {
			behind = append(behind, n)
		} else {
			step = append(step, n)
		}
	}
	if err := c.set(step, 0); err != nil {
		return err
	}
	if len(behind) == 0 {
		return nil
	}
	from := map[string]time.Duration{}
	for _, n := range behind {
		from[n] = c.shifted[n]
	}
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		gained := time.Duration(float64(time.Since(start)) * c.SlewRate)
		left := false
		for _, n := range behind {
			off := min(from[n]+gained, 0)
			if err := c.set([]string{n}, off); err != nil {
				return err
			}
			left = left || off < 0
		}
		if !left {
			return nil
		}
		select {
		case <-ctx.Done():
			// Cut short: step the rest of the way, so that no node is left behind.
			return errors.Join(ctx.Err(), c.set(behind, 0))
		case <-tick.C:
		}
	}
}

// quietLook bounds how long a quiet reset looks for a moment without a lock key as it comes, before
// it drains the node to make one.
const quietLook = time.Second

// quietReset steps node back to the real time at a moment it holds none of the workload's keys.
// Writes are paused while it looks, so no key can appear between the look and the step; paused
// writes run after the step, on the right clock. On a hot key such a moment lasts a millisecond or
// two (a release, then the next client's SET), which a loaded machine misses: after quietLook the
// reset drains the node, cutting the clients' links to it as an operator takes a node out of
// rotation before stepping its clock, until its keys are gone (the holder's release cannot reach it
// either, so at most until they expire), steps, and lets the clients back. Only if even that finds no
// moment does it step anyway, and say so: that step is a jump forward and the error puts it in the
// history.
func (c *Clock) quietReset(ctx context.Context, node string) error {
	if c.Env.Writes == nil || c.Env.Probe == nil || len(c.Env.Keys) == 0 {
		return errors.Join(c.set([]string{node}, 0), fmt.Errorf("quiet reset of %s: no way to hold writes, no lease probe or no keys to look at; stepped", node))
	}
	if c.quietStep(ctx, node, quietLook) {
		return nil
	}
	heal, err := c.drain(node)
	if err != nil {
		return errors.Join(c.set([]string{node}, 0), fmt.Errorf("quiet reset of %s: a lock key was present for %v and the node could not be drained (%w); stepped anyway, which is a jump forward", node, quietLook, err))
	}
	defer heal()
	wait := 2*c.Env.TTL + time.Second
	c.Env.Log.Info("quiet reset: clients cut from the node until it holds no lock key", "node", node, "wait", wait)
	if c.quietStep(ctx, node, wait) {
		return nil
	}
	return errors.Join(c.set([]string{node}, 0), fmt.Errorf("quiet reset of %s: a lock key was present for %v, drained as well; stepped anyway, which is a jump forward", node, quietLook+wait))
}

// quietStep steps node's clock at the first moment within d that it holds no lock key, and reports
// whether it did.
func (c *Clock) quietStep(ctx context.Context, node string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		held, err := c.heldWithWritesPaused(ctx, node)
		if err == nil && !held {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// drainToxic is the name of the cut a quiet reset puts on the clients' links to a node.
const drainToxic = "quiet-reset-drain"

// drain cuts every client group's link to node (requests are held back, as a partition's drop
// does, and delivered once healed) and returns the heal.
func (c *Clock) drain(node string) (heal func(), err error) {
	if c.Env.Links == nil {
		return nil, errors.New("its clients reach it without links")
	}
	var cut []*links.Link
	heal = func() {
		for _, l := range cut {
			if err := l.RemoveToxic(context.Background(), drainToxic); err != nil {
				c.Env.Log.Warn("quiet reset: heal the drain", "link", l.Name(), "err", err)
			}
		}
	}
	for _, l := range c.Env.Links.All() {
		if l.Node != node || !slices.Contains(c.Env.Groups, l.Group) {
			continue
		}
		if err := l.AddToxic(links.Toxic{Name: drainToxic, Type: "timeout", Stream: "upstream", Attributes: map[string]any{"timeout": 0}}); err != nil {
			heal()
			return nil, fmt.Errorf("cut %s: %w", l.Name(), err)
		}
		cut = append(cut, l)
	}
	if len(cut) == 0 {
		return nil, errors.New("no client link reaches it")
	}
	return heal, nil
}

// errHeld says the node held a lock key when the quiet reset looked.
var errHeld = errors.New("a lock key is present")

// heldWithWritesPaused holds the node's client writes back, and if it holds no key steps its clock;
// it reports whether a key was held.
func (c *Clock) heldWithWritesPaused(ctx context.Context, node string) (bool, error) {
	// The hold is bounded: should the harness stall, writes resume by themselves.
	err := c.Env.Writes.HoldWrites(ctx, node, 500*time.Millisecond, func(ctx context.Context) error {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		for _, l := range c.Env.Probe.Leases(pctx, c.Env.Keys) {
			if slices.Contains(l.Nodes, node) {
				return errHeld
			}
		}
		if pctx.Err() != nil {
			return pctx.Err() // the probe did not get an answer: nothing is known
		}
		return c.set([]string{node}, 0)
	})
	if errors.Is(err, errHeld) {
		return true, nil
	}
	return err != nil, err
}

// Healing implements Nemesis: reset every node still shifted.
func (c *Clock) Healing() []Op {
	if len(c.shifted) == 0 {
		return nil
	}
	op := Op{F: FReset, Nodes: slices.Sorted(maps.Keys(c.shifted)), Effect: history.EffectHeal}
	op, _ = c.Resolve(context.Background(), op)
	return []Op{op}
}

// Annotate implements Annotator: the invoke carries the offsets being set, the completion the
// offsets measured afterwards (nodes that cannot be measured, being down, are left out).
func (c *Clock) Annotate(_ context.Context, op Op, ev *history.Event, _ error) {
	if len(op.Nodes) == 0 {
		return
	}
	ev.Offsets = map[string]int64{}
	for _, n := range op.Nodes {
		if ev.Type == history.Invoke {
			// A strobe's invoke names the offset it flips to.
			ev.Offsets[n] = int64(c.target(op.F))
			continue
		}
		if c.Clocks == nil {
			continue
		}
		if off, err := c.Clocks.ClockOffset(n); err == nil {
			ev.Offsets[n] = int64(off)
		}
	}
	if len(ev.Offsets) == 0 {
		ev.Offsets = nil
	}
}
