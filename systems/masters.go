package systems

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/clusters"
	"github.com/lockpick-dev/lockpick/links"
)

// masters is redis-masters: N independent redis masters (the single-node locks use one, Redlock
// five), each reached by each client group through its own link, or directly when no fault of the
// run goes through links (Config.Direct). Roles never change.
type masters struct {
	backend nodeBackend
	links   *links.Set // empty when direct
	direct  bool
	nodes   []Node
	groups  []string
	// external: the servers are someone else's, and nothing may pause their clients' writes.
	external bool
}

func startMasters(ctx context.Context, cfg Config) (System, error) {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("system redis-masters: %w", err)
	}
	if cfg.Nodes < 1 {
		return nil, fmt.Errorf("system redis-masters needs at least one node, got %d", cfg.Nodes)
	}
	cluster, err := clusters.StartLocal(ctx, clusters.Config{
		Nodes: cfg.Nodes, Dir: dir, BasePort: cfg.BasePort, Persistence: cfg.Persistence,
		RedisServer: cfg.RedisServer, Logger: cfg.Logger, ClockShim: cfg.ClockShim,
	})
	if err != nil {
		return nil, fmt.Errorf("start redis-masters: %w", err)
	}
	var nodes []Node
	for _, n := range cluster.Nodes() {
		nodes = append(nodes, Node{Name: n.Name, Role: RoleMaster, Addr: n.Addr(), Data: true})
	}
	return newMasters(mastersBackend{cluster}, nodes, cfg.Groups, cfg.Direct)
}

// nodeBackend is a Backend that can stop everything it started.
type nodeBackend interface {
	Backend
	Close() error
}

// newMasters links every client group to every node, unless direct; on error it closes the backend.
func newMasters(b nodeBackend, nodes []Node, groups []string, direct bool) (*masters, error) {
	m := &masters{backend: b, links: links.New(), groups: groups, nodes: nodes, direct: direct}
	for _, n := range nodes {
		for _, g := range groups {
			if direct {
				break // no links to make
			}
			if _, err := m.links.Add(g, n.Name, n.Addr); err != nil {
				m.Close()
				return nil, err
			}
		}
	}
	return m, nil
}

// startMastersDocker runs redis-masters as containers: the same nodes, links and faults as the
// local backend, with each node in its own network namespace.
func startMastersDocker(ctx context.Context, cfg Config, dir string) (_ System, err error) {
	if cfg.Docker.Engine != nil && !cfg.Docker.Engine.Local() {
		return startMastersRemote(ctx, cfg, dir)
	}
	bin, err := clusters.FindRedisServer(cfg.RedisServer)
	if err != nil {
		return nil, err
	}
	files := []string{bin}
	if cfg.ClockShim != "" {
		files = append(files, cfg.ClockShim)
	}
	image, err := cfg.Docker.Engine.NodeImage(ctx, files)
	if err != nil {
		return nil, err
	}
	b, err := newDocker(ctx, cfg.Docker, cfg.ClockShim, persistence(cfg.Persistence), cfg.Logger)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	var nodes []Node
	for i := range cfg.Nodes {
		name := fmt.Sprintf("n%d", i+1)
		n, err := b.addRedis(ctx, name, filepath.Join(dir, name), image, bin)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, Node{Name: name, Role: RoleMaster, Addr: n.addr, Data: true})
	}
	// The containers start together: each takes the Engine a second or more.
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = b.up(ctx, n.Name) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("start redis-masters on docker: %w", err)
	}
	return newMasters(b, nodes, cfg.Groups, cfg.Direct)
}

// persistence is p, or none when unset.
func persistence(p clusters.Persistence) clusters.Persistence {
	if p == "" {
		return clusters.PersistNone
	}
	return p
}

// addr is a node's own address.
func (m *masters) addr(node string) (string, error) {
	for _, n := range m.nodes {
		if n.Name == node {
			return n.Addr, nil
		}
	}
	return "", fmt.Errorf("no node %q", node)
}

// Name implements System.
func (m *masters) Name() string { return "redis-masters" }

// Nodes implements System.
func (m *masters) Nodes() []Node { return append([]Node(nil), m.nodes...) }

// Roles implements System: every node is a master, always.
func (m *masters) Roles() map[string]Role { return StaticRoles(m.nodes).Roles() }

// Endpoints implements System. Direct, every group reaches each node at the node's own address.
func (m *masters) Endpoints(group string) ([]Endpoint, error) {
	if m.direct {
		eps := make([]Endpoint, len(m.nodes))
		for i, n := range m.nodes {
			eps[i] = Endpoint{Node: n.Name, Role: n.Role, Addr: n.Addr, Known: n.Addr}
		}
		return eps, nil
	}
	return groupEndpoints(m.links, group, m.nodes, func(n Node) string { return n.Addr })
}

// groupEndpoints are the addresses group reaches nodes at, each through its link, with the address
// known tells the node by.
func groupEndpoints(set *links.Set, group string, nodes []Node, known func(Node) string) ([]Endpoint, error) {
	eps := make([]Endpoint, len(nodes))
	for i, n := range nodes {
		l, err := set.Get(group, n.Name)
		if err != nil {
			return nil, err
		}
		eps[i] = Endpoint{Node: n.Name, Role: n.Role, Addr: l.Addr, Known: known(n)}
	}
	return eps, nil
}

// Links implements System.
func (m *masters) Links() *links.Set { return m.links }

// Backend implements System.
func (m *masters) Backend() Backend { return m.backend }

// Watch implements System: independent masters announce nothing.
func (m *masters) Watch(func(Event)) {}

// HoldWrites implements System.
func (m *masters) HoldWrites(ctx context.Context, node string, max time.Duration, f func(context.Context) error) error {
	if m.external {
		return fmt.Errorf("holding writes (CLIENT PAUSE) on node %s: it %w", node, ErrExternal)
	}
	addr, err := m.addr(node)
	if err != nil {
		return err
	}
	return holdWrites(ctx, addr, max, f)
}

// Ping implements System.
func (m *masters) Ping(ctx context.Context, node string) error {
	addr, err := m.addr(node)
	if err != nil {
		return err
	}
	return clusters.PingOnce(ctx, addr)
}

// Close implements System.
func (m *masters) Close() error {
	m.links.Close()
	return m.backend.Close()
}

// mastersBackend is clusters.Local as a Backend.
type mastersBackend struct{ *clusters.Local }

// StartEmpty implements Backend: the node's data files go first, whatever the persistence.
func (b mastersBackend) StartEmpty(ctx context.Context, node string) error {
	n, err := b.Node(node)
	if err != nil {
		return err
	}
	if b.Running(node) {
		return fmt.Errorf("node %s is already running", node)
	}
	os.Remove(filepath.Join(n.Dir, "dump.rdb"))
	os.RemoveAll(filepath.Join(n.Dir, "appendonlydir"))
	return b.Start(ctx, node)
}
