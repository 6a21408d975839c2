package systems

import (
	"context"
	"sync"
	"time"
)

// etcdRolesEvery is how often the members are asked who leads: about a raft heartbeat's worth of
// staleness.
const etcdRolesEvery = 100 * time.Millisecond

// leaderNow is the leader the newest term names, or "" when no member answers with one. It asks
// every member for its status over the member's own address; a member cut off from its peers keeps
// calling itself leader of an old term for a while, and the higher term wins.
func (s *etcdSys) leaderNow(ctx context.Context) string {
	type answer struct {
		id, leader, term uint64
	}
	answers := map[string]answer{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range s.nodes {
		wg.Go(func() {
			st, err := s.status(ctx, n.Name)
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
