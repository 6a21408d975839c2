package nemesis

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/links"
	"github.com/lockpick-dev/lockpick/systems"
)

// pathCutter cuts and heals paths, as from -> to: toxics on links (toxicSet), or, for the paths
// between servers on a backend whose servers talk over their own interfaces (docker), the backend's
// PeerCutter (peerPaths).
type pathCutter interface {
	add(from, to string, toxics []links.Toxic) error
	removeAndReset(ctx context.Context, from, to string, reset bool) error
	inPlace() map[string][]string
}

// serverPaths is how a nemesis cuts the paths between servers in env: with the backend's PeerCutter
// when it offers one (mode is what a cut does there), else with toxics on the links.
func serverPaths(env Env, mode string) pathCutter {
	if env.Peers != nil {
		return &peerPaths{cutter: env.Peers, mode: mode}
	}
	return &toxicSet{links: env.Links}
}

// peerPaths cuts paths between servers with a systems.PeerCutter. A cut is recorded before it is
// made, so one that half landed is healed all the same; a heal forgets it once it succeeded. On a
// real interface a dropped path holds TCP's data back and delivers it when healed, as links.Stall
// does in the harness, so a stall is a cut in mode drop; reset is not needed to heal it (a
// connection whose far end died meanwhile is reset by that end's kernel on the next retransmission).
type peerPaths struct {
	cutter systems.PeerCutter
	mode   string
	placed placedPaths
}

// placedPaths are the paths between servers a nemesis has put a fault on and not yet taken it off.
type placedPaths struct {
	mu    sync.Mutex
	paths map[string]map[string]bool // from -> to
}

// put records the path from -> to as faulted.
func (p *placedPaths) put(from, to string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paths == nil {
		p.paths = map[string]map[string]bool{}
	}
	if p.paths[from] == nil {
		p.paths[from] = map[string]bool{}
	}
	p.paths[from][to] = true
}

// forget records the path from -> to as healed.
func (p *placedPaths) forget(from, to string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.paths[from], to)
	if len(p.paths[from]) == 0 {
		delete(p.paths, from)
	}
}

// list is every faulted path, by caller.
func (p *placedPaths) list() map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]string{}
	for from, tos := range p.paths {
		out[from] = slices.Sorted(maps.Keys(tos))
	}
	return out
}

// peerOpTimeout bounds one cut or heal (a few nsenter and iptables runs, and an inspect call).
const peerOpTimeout = 30 * time.Second

func (p *peerPaths) add(from, to string, _ []links.Toxic) error {
	p.placed.put(from, to)
	ctx, cancel := context.WithTimeout(context.Background(), peerOpTimeout)
	defer cancel()
	return p.cutter.CutPeer(ctx, from, to, p.mode)
}

func (p *peerPaths) removeAndReset(ctx context.Context, from, to string, _ bool) error {
	if err := p.cutter.HealPeer(ctx, from, to); err != nil {
		return err
	}
	p.placed.forget(from, to)
	return nil
}

func (p *peerPaths) inPlace() map[string][]string { return p.placed.list() }

// peerLatency slows paths between servers with a systems.PeerSlower. As peerPaths does for cuts, a
// slowdown is recorded before it is made, so one that half landed is restored all the same; a
// restore forgets it once it succeeded, and logs what the slowdown did.
type peerLatency struct {
	slower systems.PeerSlower
	log    *slog.Logger
	placed placedPaths
}

func (p *peerLatency) slow(from, to string, delay, jitter time.Duration) error {
	if p.slower == nil {
		return errPeerLatency
	}
	p.placed.put(from, to)
	ctx, cancel := context.WithTimeout(context.Background(), peerOpTimeout)
	defer cancel()
	return p.slower.SlowPeer(ctx, from, to, delay, jitter)
}

func (p *peerLatency) restore(ctx context.Context, from, to string) error {
	st, err := p.slower.UnslowPeer(ctx, from, to)
	if err != nil {
		return err
	}
	if p.log != nil {
		p.log.Info("latency: path between servers restored", "from", from, "to", to,
			"delayed", st.Delayed, "passed", st.Passed, "failed", st.Failed)
	}
	p.placed.forget(from, to)
	return nil
}

func (p *peerLatency) inPlace() map[string][]string { return p.placed.list() }

// errPeerLatency refuses latency on the paths between servers where neither a proxy sits on them
// nor the backend slows them (the docker backends of both Engines do; this guards a backend that
// cuts the paths and cannot slow them).
var errPeerLatency = errors.New("paths=peers: the servers talk over their own interfaces, and this backend cannot slow them: use latency on the client paths (drop paths=peers), or partition:paths=peers to cut the servers' paths")
