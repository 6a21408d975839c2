package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// ClientPauser stops client processes of the workload. Catch waits until a process is between
// reading and writing the resource under its lease, stops it there, and returns its id and a
// function that lets it go on.
type ClientPauser interface {
	Catch(ctx context.Context, pick func(n int) int) (process int, resume func(), err error)
}

// ClientPause stops one client process between its read and its write for Duration, a
// stop-the-world pause such as a garbage collector makes. With Duration beyond the TTL the lease
// expires during the pause and the process writes on without knowing it: Kleppmann's case.
//
// The fault's history events name the process as "p<id>" in Nodes; the pause begins before the
// fault's invoke is recorded and ends only after the heal's invoke is recorded, so the recorded
// window covers the whole pause.
type ClientPause struct {
	Clients  ClientPauser
	Interval time.Duration
	Duration time.Duration

	mu     sync.Mutex
	paused map[string]pausedClient // "p<id>" -> its pause
	rng    *rand.Rand              // which holder a pause catches, drawn from the run's seed
}

// pick chooses which of n processes holding a lease a pause catches.
func (c *ClientPause) pick(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rng == nil {
		c.rng = rand.New(rand.NewPCG(1, 2))
	}
	return c.rng.IntN(n)
}

type pausedClient struct {
	resume func()
	at     time.Time
}

// Name implements Nemesis.
func (c *ClientPause) Name() string { return "client-pause" }

// Plan implements Nemesis: a pause, then its resume Duration later, then the next pause after a
// jittered Interval.
func (c *ClientPause) Plan(rng *rand.Rand, timeLimit time.Duration) []Op {
	var plan []Op
	t := jitter(rng, c.Interval)
	// Every pause ends on schedule inside the fault phase: one cut short by the final heal would be
	// shorter than the pause asked for, and could end before its lease did.
	for t+c.Duration < timeLimit {
		plan = append(plan,
			Op{At: t, F: "pause", Effect: history.EffectFault},
			Op{At: t + c.Duration, F: "resume", Effect: history.EffectHeal})
		t += c.Duration + jitter(rng, c.Interval)
	}
	c.rng = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	return plan
}

// Resolve implements Resolver. A pause waits for a process to reach its pause point; a resume waits
// until its pause has lasted Duration, counted from when the process actually stopped.
func (c *ClientPause) Resolve(ctx context.Context, op Op) (Op, error) {
	if c.Clients == nil {
		return op, errors.New("the workload cannot pause clients: use --workload counter")
	}
	switch op.F {
	case "pause":
		pid, resume, err := c.Clients.Catch(ctx, c.pick)
		if err != nil {
			return op, err
		}
		name := "p" + strconv.Itoa(pid)
		c.mu.Lock()
		if c.paused == nil {
			c.paused = map[string]pausedClient{}
		}
		c.paused[name] = pausedClient{resume: resume, at: time.Now()}
		c.mu.Unlock()
		op.Nodes = []string{name}
		return op, nil
	case "resume":
		c.mu.Lock()
		var name string
		var pc pausedClient
		for n, p := range c.paused {
			name, pc = n, p
		}
		c.mu.Unlock()
		if name == "" {
			op.Nodes = nil
			return op, nil
		}
		t := time.NewTimer(time.Until(pc.at.Add(c.Duration)))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return op, ctx.Err()
		case <-t.C:
		}
		op.Nodes = []string{name}
		return op, nil
	}
	return op, fmt.Errorf("unknown operation %q", op.F)
}

// Apply implements Nemesis. A pause has already begun when Resolve returns; a resume lets the
// process go on.
func (c *ClientPause) Apply(_ context.Context, op Op) error {
	switch op.F {
	case "pause":
		return nil
	case "resume":
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range op.Nodes {
			if p, ok := c.paused[n]; ok {
				p.resume()
				delete(c.paused, n)
			}
		}
		return nil
	}
	return fmt.Errorf("unknown operation %q", op.F)
}

// Healing implements Nemesis: resume every process still paused.
func (c *ClientPause) Healing() []Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ops []Op
	for n := range c.paused {
		ops = append(ops, Op{F: "resume", Nodes: []string{n}, Effect: history.EffectHeal})
	}
	return ops
}

// clientPauseParams are the client-pause nemesis's parameters.
func clientPauseParams() []Param {
	return []Param{intervalParam(), durationParam("2×TTL", "how long a client stays paused")}
}

func buildClientPause(env Env, p *Params) (Nemesis, error) {
	c := &ClientPause{Clients: env.Clients}
	c.Interval = p.Duration("interval", env.Interval)
	c.Duration = p.Duration("duration", 2*env.TTL)
	if c.Interval <= 0 {
		return nil, fmt.Errorf("interval must be positive")
	}
	if c.Duration <= 0 {
		return nil, fmt.Errorf("duration must be positive (for example duration=4s; above the TTL for a lease to expire during the pause)")
	}
	return c, nil
}
