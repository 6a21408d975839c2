package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// HalfOpen drops every packet of the lock holders' connections below the harness's proxies, both
// ways and with no FIN or RST, as a dead switch or a NAT entry lost on the way does: the client's
// requests and the server's probes vanish. A partition in the links cannot do this (the link's
// own socket still answers the server's TCP keepalives), so the server would never end the session.
// Here the server's keepalive ends it; a session lock goes with it while its holder knows nothing.
type HalfOpen struct {
	Env      Env
	Interval time.Duration
	Duration time.Duration

	mu    sync.Mutex
	heals []func(context.Context) error
}

func halfOpenParams() []Param {
	return []Param{
		durationParam("3×TTL", "how long the holders' connections stay half-open; the server's keepalive must run out within it"),
		intervalParam(),
	}
}

func buildHalfOpen(env Env, p *Params) (Nemesis, error) {
	n := &HalfOpen{Env: env, Interval: p.Duration("interval", env.Interval), Duration: p.Duration("duration", 3*env.TTL)}
	if n.Interval <= 0 || n.Duration <= 0 {
		return nil, errors.New("halfopen: interval and duration must be positive")
	}
	return n, nil
}

// Name implements Nemesis.
func (n *HalfOpen) Name() string { return "halfopen" }

// Plan implements Nemesis: a blackhole of the holders' connections on every data node, and its heal.
func (n *HalfOpen) Plan(rng *rand.Rand, timeLimit time.Duration) []Op {
	return timedPlan(rng, n.Interval, timeLimit, func(at time.Duration) ([]Op, time.Duration) {
		end := at + n.Duration
		return []Op{
			{At: at, F: "blackhole", Nodes: append([]string(nil), n.Env.Nodes...), Effect: history.EffectFault},
			{At: end, F: "heal", Nodes: append([]string(nil), n.Env.Nodes...), Effect: history.EffectHeal},
		}, end
	})
}

// Apply implements Nemesis.
func (n *HalfOpen) Apply(ctx context.Context, op Op) error {
	switch op.F {
	case "heal":
		return n.heal(ctx)
	case "blackhole":
	default:
		return fmt.Errorf("halfopen nemesis cannot %q", op.F)
	}
	if n.Env.Sessions == nil {
		return errors.New("halfopen: the system has no sessions to cut")
	}
	var errs []error
	for _, node := range op.Nodes {
		pids, heal, err := n.Env.Sessions.BlackholeSessions(ctx, node)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n.mu.Lock()
		n.heals = append(n.heals, heal)
		n.mu.Unlock()
		if n.Env.Log != nil {
			n.Env.Log.Info("halfopen: sessions' connections dropped", "node", node, "pids", pids)
		}
	}
	return errors.Join(errs...)
}

// heal removes every drop in place.
func (n *HalfOpen) heal(ctx context.Context) error {
	n.mu.Lock()
	heals := n.heals
	n.heals = nil
	n.mu.Unlock()
	var errs []error
	for _, h := range heals {
		errs = append(errs, h(ctx))
	}
	return errors.Join(errs...)
}

// Healing implements Nemesis: the drops still in place.
func (n *HalfOpen) Healing() []Op {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.heals) == 0 {
		return nil
	}
	return []Op{{F: "heal", Nodes: append([]string(nil), n.Env.Nodes...), Effect: history.EffectHeal}}
}
