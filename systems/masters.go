package systems

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
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

func startMasters(ctx context.Context, cfg Config) (_ System, err error) {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("system redis-masters: %w", err)
	}
	if cfg.Nodes < 1 {
		return nil, fmt.Errorf("system redis-masters needs at least one node, got %d", cfg.Nodes)
	}
	bin, err := clusters.FindRedisServer(cfg.RedisServer)
	if err != nil {
		return nil, err
	}
	shim := cfg.ClockShim
	if shim != "" {
		if shim, err = filepath.Abs(shim); err != nil {
			return nil, fmt.Errorf("clock shim: %w", err)
		}
	}
	persist := persistence(cfg.Persistence)
	t := newTable(localRunner{shim}, shim, persist, cfg.Logger)
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	ports, err := nodePorts(cfg.Nodes, cfg.BasePort)
	if err != nil {
		return nil, err
	}
	var nodes []Node
	for i, l := range ports {
		name := fmt.Sprintf("n%d", i+1)
		nd := filepath.Join(dir, name)
		port := l.Addr().(*net.TCPAddr).Port
		n, err := t.add(ctx, nodeSpec{name: name, dir: nd, addr: l.Addr().String(), reserved: l, shim: true,
			cmd:  append([]string{bin}, clusters.RedisArgs("127.0.0.1", port, nd, persist)...),
			data: redisData(nd)})
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, Node{Name: name, Role: RoleMaster, Addr: n.addr, Data: true})
	}
	for _, n := range nodes {
		if err := t.Start(ctx, n.Name); err != nil {
			return nil, fmt.Errorf("start redis-masters: %w", err)
		}
	}
	return newMasters(t, nodes, cfg.Groups, cfg.Direct)
}

// redisData are the files of a redis node's data, which a start without data removes.
func redisData(dir string) []string {
	return []string{filepath.Join(dir, "dump.rdb"), filepath.Join(dir, "appendonlydir")}
}

// nodePorts holds count ports for local nodes: BasePort.. when given (each must be free), else
// free ports below the ephemeral range (clusters.ReservePorts). Each stays held until its node
// starts, so nothing else this process listens on can take it first.
func nodePorts(count, base int) ([]net.Listener, error) {
	if base == 0 {
		return clusters.ReservePorts(count)
	}
	if base < 1024 || base+count-1 > 65535 {
		return nil, fmt.Errorf("--base-port %d: the ports %d..%d must lie in 1024..65535", base, base, base+count-1)
	}
	var ls []net.Listener
	for i := range count {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i)))
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, fmt.Errorf("port %d is in use: choose another --base-port, or omit it to use free ports", base+i)
		}
		ls = append(ls, l)
	}
	return ls, nil
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
	var names []string
	for i := range cfg.Nodes {
		name := fmt.Sprintf("n%d", i+1)
		nd := filepath.Join(dir, name)
		n, err := b.add(ctx, nodeSpec{name: name, dir: nd, image: image, idle: redisIdle(bin), port: redisPort, shim: true,
			cmd:  append([]string{bin}, clusters.RedisArgs("0.0.0.0", redisPort, nd, b.persist)...),
			data: redisData(nd)})
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, Node{Name: name, Role: RoleMaster, Addr: n.addr, Data: true})
		names = append(names, name)
	}
	// The containers start together, then the nodes: each takes the Engine a second or more.
	if err := b.startContainers(ctx, names); err != nil {
		return nil, fmt.Errorf("start redis-masters on docker: %w", err)
	}
	if err := b.startTogether(ctx, names); err != nil {
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
