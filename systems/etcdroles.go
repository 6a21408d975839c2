package systems

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// etcdRoles keeps the etcd system's view of who leads: it asks every member for its status over the
// member's own address (bypassing the links, so that a fault does not blind the harness) and names
// leader the member the status with the highest raft term names. A member cut off from its peers
// keeps calling itself leader of an old term for a while; the higher term wins.
type etcdRoles struct {
	sys *etcdSys
	log *slog.Logger

	mu     sync.Mutex
	roles  map[string]Role
	subs   []func(Event)
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// etcdRolesEvery is how often the members are asked: about a raft heartbeat's worth of staleness.
const etcdRolesEvery = 100 * time.Millisecond

func newEtcdRoles(s *etcdSys, log *slog.Logger) *etcdRoles {
	ctx, cancel := context.WithCancel(context.Background())
	r := &etcdRoles{sys: s, log: log, roles: StaticRoles(s.nodes).Roles(), cancel: cancel}
	r.wg.Go(func() {
		t := time.NewTicker(etcdRolesEvery)
		defer t.Stop()
		for {
			r.update(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return r
}

// leaderNow is the leader the newest term names, or "" when no member answers with one.
func (r *etcdRoles) leaderNow(ctx context.Context) string {
	type answer struct {
		id, leader, term uint64
	}
	answers := map[string]answer{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range r.sys.nodes {
		wg.Go(func() {
			st, err := r.sys.status(ctx, n.Name)
			if err != nil {
				return
			}
			mu.Lock()
			answers[n.Name] = answer{id: st.Header.MemberId, leader: st.Leader, term: st.RaftTerm}
			mu.Unlock()
		})
	}
	wg.Wait()
	var best answer
	for _, a := range answers {
		if a.leader != 0 && a.term > best.term {
			best = a
		}
	}
	for name, a := range answers {
		if best.leader != 0 && a.id == best.leader {
			return name
		}
	}
	return ""
}

func (r *etcdRoles) update(ctx context.Context) {
	leader := r.leaderNow(ctx)
	if leader == "" || ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	changed := map[string]Role{}
	for name, role := range r.roles {
		want := RoleFollower
		if name == leader {
			want = RoleLeader
		}
		if role != want {
			changed[name] = want
			r.roles[name] = want
		}
	}
	subs := slices.Clone(r.subs)
	r.mu.Unlock()
	if len(changed) == 0 {
		return
	}
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(changed)) {
		parts = append(parts, fmt.Sprintf("%s is %s", n, changed[n]))
	}
	e := Event{Time: time.Now(), Kind: KindRoles, Text: strings.Join(parts, ", "), Roles: changed}
	r.log.Debug("etcd roles", "leader", leader, "changed", e.Text)
	for _, f := range subs {
		f(e)
	}
}

func (r *etcdRoles) current() map[string]Role {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.roles)
}

func (r *etcdRoles) subscribe(f func(Event)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subs = append(r.subs, f)
}

func (r *etcdRoles) close() {
	r.cancel()
	r.wg.Wait()
}
