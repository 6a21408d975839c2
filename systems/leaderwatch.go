package systems

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"
)

// leaderWatch keeps a family's view of who leads: every interval it asks leaderNow (the family's
// own reading of its members, over their own addresses so that a fault does not blind the harness)
// and, when the leader changed, marks it leader and every other node follower and tells the
// watchers. A reading with no leader (an election under way) leaves the roles as they were.
type leaderWatch struct {
	roleBoard
	leaderNow func(ctx context.Context) string

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func watchLeader(family string, nodes []Node, every time.Duration, leaderNow func(context.Context) string, log *slog.Logger) *leaderWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &leaderWatch{roleBoard: newRoleBoard(family, nodes, log), leaderNow: leaderNow, cancel: cancel}
	w.wg.Go(func() {
		w.update(ctx)
		tickUntilDone(ctx, every, w.update)
	})
	return w
}

func (w *leaderWatch) update(ctx context.Context) {
	leader := w.leaderNow(ctx)
	if leader == "" || ctx.Err() != nil {
		return
	}
	w.change(func(roles map[string]Role) map[string]Role {
		changed := map[string]Role{}
		for name, role := range roles {
			want := RoleFollower
			if name == leader {
				want = RoleLeader
			}
			if role != want {
				changed[name] = want
				roles[name] = want
			}
		}
		return changed
	})
}

func (w *leaderWatch) close() {
	w.cancel()
	w.wg.Wait()
}

// quorumReady is the readiness of a member of a family that serves only with a leader, which needs a
// majority of its members running: the member must listen at addr, and once a majority runs, serves
// must answer nil too. While fewer run, a member that listens is as ready as it can be (its start is
// waited for by the system, or by the start of the others).
func quorumReady(ctx context.Context, b nodeBackend, nodes []Node, addr string, serves func() error) error {
	d := net.Dialer{Timeout: 300 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	c.Close()
	running := 0
	for _, n := range nodes {
		if b.Running(n.Name) {
			running++
		}
	}
	if running <= len(nodes)/2 {
		return nil
	}
	return serves()
}
