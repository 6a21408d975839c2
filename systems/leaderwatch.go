package systems

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// leaderWatch keeps a family's view of who leads: every interval it asks leaderNow (the family's
// own reading of its members, over their own addresses so that a fault does not blind the harness)
// and, when the leader changed, marks it leader and every other node follower and tells the
// watchers. A reading with no leader (an election under way) leaves the roles as they were.
type leaderWatch struct {
	leaderNow func(ctx context.Context) string
	family    string
	log       *slog.Logger

	mu     sync.Mutex
	roles  map[string]Role
	subs   []func(Event)
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func watchLeader(family string, nodes []Node, every time.Duration, leaderNow func(context.Context) string, log *slog.Logger) *leaderWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &leaderWatch{leaderNow: leaderNow, family: family, log: log, roles: StaticRoles(nodes).Roles(), cancel: cancel}
	w.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			w.update(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return w
}

func (w *leaderWatch) update(ctx context.Context) {
	leader := w.leaderNow(ctx)
	if leader == "" || ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	changed := map[string]Role{}
	for name, role := range w.roles {
		want := RoleFollower
		if name == leader {
			want = RoleLeader
		}
		if role != want {
			changed[name] = want
			w.roles[name] = want
		}
	}
	subs := slices.Clone(w.subs)
	w.mu.Unlock()
	if len(changed) == 0 {
		return
	}
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(changed)) {
		parts = append(parts, fmt.Sprintf("%s is %s", n, changed[n]))
	}
	e := Event{Time: time.Now(), Kind: KindRoles, Text: strings.Join(parts, ", "), Roles: changed}
	w.log.Debug(w.family+" roles", "leader", leader, "changed", e.Text)
	for _, f := range subs {
		f(e)
	}
}

func (w *leaderWatch) current() map[string]Role {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.roles)
}

func (w *leaderWatch) subscribe(f func(Event)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs = append(w.subs, f)
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
