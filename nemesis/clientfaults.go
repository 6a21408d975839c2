package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// ClientCrasher kills client processes at named points of their work (workloads.ClientFaults).
type ClientCrasher interface {
	// Crash waits until a process reaches point ("holding", "after-setnx", or "any") and kills it
	// there; it returns the process's id.
	Crash(ctx context.Context, point string) (int, error)
}

// ClientClocks moves the wall clocks of client slots (workloads.ClientFaults).
type ClientClocks interface {
	Slots() int
	// ShiftClock sets slot's offset from the real time and returns the slot's current process id.
	ShiftClock(slot int, offset time.Duration) int
}

// Crash points of the client-crash nemesis.
func crashPoints() []string { return []string{"holding", "after-setnx", "any"} }

// ClientCrash kills a client process at a point of its work, as kill -9 of a client program would:
// it releases nothing, its background renewals stop, and the slot goes on as a new process. Killed
// between SETNX and EXPIRE, a naive lock's key never expires. A crash has no heal; its "restart"
// operation marks the slot's fresh process taking over, so that the liveness check counts from it.
type ClientCrash struct {
	Clients  ClientCrasher
	Point    string
	Interval time.Duration
	// Wait bounds how long a crash waits for a process to reach its point; none that does is a
	// skipped crash.
	Wait time.Duration

	mu   sync.Mutex
	last []string // the process the latest crash killed
}

// clientCrashParams are the client-crash nemesis's parameters.
func clientCrashParams() []Param {
	return []Param{
		{Name: "point", Type: TypeChoice, Values: crashPoints(), Default: "holding", Help: "where in its work a client is killed"},
		intervalParam(),
		waitParam("max(--interval/2, TTL)"),
	}
}

func buildClientCrash(env Env, p *Params) (Nemesis, error) {
	c := &ClientCrash{Clients: env.Crashes}
	c.Point = p.Choice("point", "holding", crashPoints()...)
	if c.Point != "holding" && c.Point != "any" && !slices.Contains(env.CrashPoints, c.Point) {
		return nil, fmt.Errorf("point=%s: this lock's acquire has no such step, so no client would ever crash there (%s): use point=holding", c.Point, innerSteps(env.CrashPoints))
	}
	c.Interval = p.Duration("interval", env.Interval)
	c.Wait = p.Duration("wait", max(env.Interval/2, env.TTL))
	if c.Interval <= 0 || c.Wait <= 0 {
		return nil, fmt.Errorf("interval and wait must be positive (for example interval=3s)")
	}
	return c, nil
}

// innerSteps says which steps inside its acquire a lock has, for a refusal.
func innerSteps(points []string) string {
	if len(points) == 0 {
		return "its clients can only be crashed while holding"
	}
	return "its steps: " + strings.Join(points, ", ")
}

// Name implements Nemesis.
func (c *ClientCrash) Name() string { return "client-crash" }

// Plan implements Nemesis: a crash, then the slot's restart, every jittered Interval.
func (c *ClientCrash) Plan(rng *rand.Rand, timeLimit time.Duration) []Op {
	var plan []Op
	for t := jitter(rng, c.Interval); t+c.Wait < timeLimit; t += c.Wait + jitter(rng, c.Interval) {
		plan = append(plan, Op{At: t, F: "crash", Effect: history.EffectFault}, Op{At: t + c.Wait, F: "restart", Effect: history.EffectHeal})
	}
	return plan
}

// Resolve implements Resolver: a crash waits for a process at its point and kills it there; a
// restart names the process the crash killed.
func (c *ClientCrash) Resolve(ctx context.Context, op Op) (Op, error) {
	if c.Clients == nil {
		return op, errors.New("the workload cannot crash its clients")
	}
	switch op.F {
	case "crash":
		wctx, cancel := context.WithTimeout(ctx, c.Wait)
		defer cancel()
		pid, err := c.Clients.Crash(wctx, c.Point)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			op.Nodes = nil // no process reached the point in time: skipped
			return op, nil
		}
		if err != nil {
			return op, err
		}
		op.Nodes = []string{"p" + strconv.Itoa(pid)}
		c.mu.Lock()
		c.last = op.Nodes
		c.mu.Unlock()
		return op, nil
	case "restart":
		c.mu.Lock()
		op.Nodes, c.last = c.last, nil
		c.mu.Unlock()
		return op, nil
	}
	return op, fmt.Errorf("unknown operation %q", op.F)
}

// Apply implements Nemesis: the process died when Resolve caught it.
func (c *ClientCrash) Apply(context.Context, Op) error { return nil }

// Healing implements Nemesis: nothing to undo.
func (c *ClientCrash) Healing() []Op { return nil }

// Annotate implements Annotator: a crash names its point.
func (c *ClientCrash) Annotate(_ context.Context, op Op, ev *history.Event, _ error) {
	if op.F == "crash" {
		ev.Value = c.Point
	}
}

// ClientClock moves one client slot's wall clock (or every slot's) by Offset for Duration, then back:
// locks that trust client clocks (seed 002's SETNX/GETSET timestamps, PXAT expiries) see leases
// end early or late. The events name the slot's process as "p<id>"; Offsets carry the offset.
type ClientClock struct {
	Clocks   ClientClocks
	Target   string // "one" or "all"
	Offset   time.Duration
	Duration time.Duration
	Interval time.Duration

	rng     *rand.Rand
	mu      sync.Mutex
	shifted map[int]string // slot -> the process name its fault named
}

// clientClockParams are the client-clock nemesis's parameters.
func clientClockParams() []Param {
	return []Param{
		{Name: "target", Type: TypeChoice, Values: []string{"one", "all"}, Default: "one", Help: "one client process, or all of them"},
		{Name: "offset", Type: TypeDuration, Default: "2×TTL", Help: "the size of a jump"},
		{Name: "jump", Type: TypeChoice, Values: []string{"forward", "back"}, Default: "forward", Help: "which way the clock jumps"},
		durationParam("2×TTL", "how long a jump lasts"),
		intervalParam(),
	}
}

func buildClientClock(env Env, p *Params) (Nemesis, error) {
	c := &ClientClock{Clocks: env.ClientClocks, shifted: map[int]string{}}
	c.Target = p.Choice("target", "one", "one", "all")
	c.Offset = p.Duration("offset", 2*env.TTL)
	back := p.Choice("jump", "forward", "forward", "back")
	c.Duration = p.Duration("duration", 2*env.TTL)
	c.Interval = p.Duration("interval", env.Interval)
	switch {
	case c.Offset <= 0:
		return nil, fmt.Errorf("offset must be positive (for example offset=4s)")
	case c.Duration <= 0 || c.Interval <= 0:
		return nil, fmt.Errorf("duration and interval must be positive")
	}
	if back == "back" {
		c.Offset = -c.Offset
	}
	return c, nil
}

// Name implements Nemesis.
func (c *ClientClock) Name() string { return "client-clock" }

// Plan implements Nemesis: a jump, its reset Duration later, every jittered Interval.
func (c *ClientClock) Plan(rng *rand.Rand, timeLimit time.Duration) []Op {
	var plan []Op
	for t := jitter(rng, c.Interval); t+c.Duration < timeLimit; t += c.Duration + jitter(rng, c.Interval) {
		plan = append(plan, Op{At: t, F: "jump", Effect: history.EffectFault}, Op{At: t + c.Duration, F: "reset", Effect: history.EffectHeal})
	}
	c.rng = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	return plan
}

// Resolve implements Resolver: a jump picks its slots (seeded), a reset names the slots shifted.
func (c *ClientClock) Resolve(_ context.Context, op Op) (Op, error) {
	if c.Clocks == nil {
		return op, errors.New("the workload's clients have no clock the harness controls")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	op.Nodes = nil
	if op.F == "reset" {
		for _, n := range c.shifted {
			op.Nodes = append(op.Nodes, n)
		}
		return op, nil
	}
	if c.rng == nil {
		c.rng = rand.New(rand.NewPCG(1, 2))
	}
	slots := []int{c.rng.IntN(c.Clocks.Slots())}
	if c.Target == "all" {
		slots = slots[:0]
		for s := range c.Clocks.Slots() {
			slots = append(slots, s)
		}
	}
	for _, s := range slots {
		name := "p" + strconv.Itoa(c.Clocks.ShiftClock(s, 0)) // the slot's current process
		c.shifted[s] = name
		op.Nodes = append(op.Nodes, name)
	}
	return op, nil
}

// Apply implements Nemesis.
func (c *ClientClock) Apply(_ context.Context, op Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s := range c.shifted {
		if op.F == "jump" {
			c.Clocks.ShiftClock(s, c.Offset)
			continue
		}
		c.Clocks.ShiftClock(s, 0)
		delete(c.shifted, s)
	}
	return nil
}

// Healing implements Nemesis: reset every slot still shifted.
func (c *ClientClock) Healing() []Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.shifted) == 0 {
		return nil
	}
	var nodes []string
	for _, n := range c.shifted {
		nodes = append(nodes, n)
	}
	return []Op{{F: "reset", Nodes: nodes, Effect: history.EffectHeal}}
}

// Annotate implements Annotator: the invoke of a jump carries the offset set on each process.
func (c *ClientClock) Annotate(_ context.Context, op Op, ev *history.Event, _ error) {
	if ev.Type != history.Invoke || len(op.Nodes) == 0 {
		return
	}
	ev.Offsets = map[string]int64{}
	for _, n := range op.Nodes {
		if op.F == "jump" {
			ev.Offsets[n] = int64(c.Offset)
		} else {
			ev.Offsets[n] = 0
		}
	}
}
