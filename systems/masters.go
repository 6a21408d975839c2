package systems

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockpick-dev/lockpick/clusters"
	"github.com/lockpick-dev/lockpick/links"
)

// masters is redis-masters: N independent redis masters (the single-node locks use one, Redlock
// five), each reached by each client group through its own link, or directly when no fault of the
// run goes through links (Config.Direct). Roles never change.
type masters struct {
	cluster *clusters.Local
	links   *links.Set // empty when direct
	direct  bool
	nodes   []Node
	groups  []string
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
	m := &masters{cluster: cluster, links: links.New(), direct: cfg.Direct, groups: cfg.Groups}
	for _, n := range cluster.Nodes() {
		m.nodes = append(m.nodes, Node{Name: n.Name, Role: RoleMaster, Addr: n.Addr(), Data: true})
	}
	for _, n := range m.nodes {
		for _, g := range cfg.Groups {
			if m.direct {
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
func (m *masters) Backend() Backend { return mastersBackend{m.cluster} }

// Watch implements System: independent masters announce nothing.
func (m *masters) Watch(func(Event)) {}

// HoldWrites implements System.
func (m *masters) HoldWrites(ctx context.Context, node string, max time.Duration, f func(context.Context) error) error {
	n, err := m.cluster.Node(node)
	if err != nil {
		return err
	}
	return holdWrites(ctx, n.Addr(), max, f)
}

// Ping implements System.
func (m *masters) Ping(ctx context.Context, node string) error {
	n, err := m.cluster.Node(node)
	if err != nil {
		return err
	}
	return clusters.PingOnce(ctx, n.Addr())
}

// Close implements System.
func (m *masters) Close() error {
	m.links.Close()
	return m.cluster.Close()
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
