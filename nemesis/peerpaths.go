package nemesis

import (
	"context"
	"errors"
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

	mu     sync.Mutex
	placed map[string]map[string]bool // from -> to
}

// peerOpTimeout bounds one cut or heal (a few nsenter and iptables runs, and an inspect call).
const peerOpTimeout = 30 * time.Second

func (p *peerPaths) add(from, to string, _ []links.Toxic) error {
	p.mu.Lock()
	if p.placed == nil {
		p.placed = map[string]map[string]bool{}
	}
	if p.placed[from] == nil {
		p.placed[from] = map[string]bool{}
	}
	p.placed[from][to] = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), peerOpTimeout)
	defer cancel()
	return p.cutter.CutPeer(ctx, from, to, p.mode)
}

func (p *peerPaths) removeAndReset(ctx context.Context, from, to string, _ bool) error {
	if err := p.cutter.HealPeer(ctx, from, to); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.placed[from], to)
	if len(p.placed[from]) == 0 {
		delete(p.placed, from)
	}
	return nil
}

func (p *peerPaths) inPlace() map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]string{}
	for from, tos := range p.placed {
		out[from] = slices.Sorted(maps.Keys(tos))
	}
	return out
}

// errPeerLatency refuses latency on the paths between servers where no proxy sits on them.
var errPeerLatency = errors.New("paths=peers: the servers of a docker run talk over their own interfaces, with no proxy of the harness between them to slow, and tc netem does not exist on this kernel: use latency on the client paths (drop paths=peers), partition:paths=peers to cut the servers' paths, or --backend local")
