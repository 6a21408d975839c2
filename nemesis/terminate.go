package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// Terminate ends the server sessions of the clients that hold locks, as an administrator's
// pg_terminate_backend, a pooler recycling its connections or an idle-session timeout does. A
// session-level lock ends with its session, and its holder hears of it only when it next uses the
// connection; a lease table's lease outlives the session. The fault is instant; its window ("settle",
// duration later) is the time clients take to reconnect.
type Terminate struct {
	Env      Env
	Interval time.Duration
	Settle   time.Duration
}

func terminateParams() []Param {
	return []Param{
		durationParam("TTL/2", "the fault's window after the sessions end, while clients reconnect"),
		intervalParam(),
	}
}

func buildTerminate(env Env, p *Params) (Nemesis, error) {
	n := &Terminate{Env: env, Interval: p.Duration("interval", env.Interval), Settle: p.Duration("duration", env.TTL/2)}
	if n.Interval <= 0 || n.Settle <= 0 {
		return nil, errors.New("terminate: interval and duration must be positive")
	}
	return n, nil
}

// Name implements Nemesis.
func (n *Terminate) Name() string { return "terminate" }

// Plan implements Nemesis: a terminate on every data node, and its settle.
func (n *Terminate) Plan(rng *rand.Rand, timeLimit time.Duration) []Op {
	return timedPlan(rng, n.Interval, timeLimit, func(at time.Duration) ([]Op, time.Duration) {
		end := at + n.Settle
		return []Op{
			{At: at, F: "terminate", Nodes: append([]string(nil), n.Env.Nodes...), Effect: history.EffectFault},
			{At: end, F: "settle", Nodes: append([]string(nil), n.Env.Nodes...), Effect: history.EffectHeal},
		}, end
	})
}

// Apply implements Nemesis.
func (n *Terminate) Apply(ctx context.Context, op Op) error {
	switch op.F {
	case "settle":
		return nil
	case "terminate":
	default:
		return fmt.Errorf("terminate nemesis cannot %q", op.F)
	}
	if n.Env.Sessions == nil {
		return errors.New("terminate: the system has no sessions to end")
	}
	var errs []error
	for _, node := range op.Nodes {
		pids, err := n.Env.Sessions.EndSessions(ctx, node)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n.Env.Log != nil {
			n.Env.Log.Info("terminate: sessions ended", "node", node, "pids", pids)
		}
	}
	return errors.Join(errs...)
}

// Healing implements Nemesis: nothing stays broken.
func (n *Terminate) Healing() []Op { return nil }
