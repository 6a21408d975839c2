package systems

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

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

// mastersTopology is redis-masters.
type mastersTopology struct{}

// Name implements Topology.
func (mastersTopology) Name() string { return "redis-masters" }

// Layout implements Topology: n1..nN, each a master; N is Config.Nodes, at least one.
func (mastersTopology) Layout(cfg Config) ([]Node, error) {
	if cfg.Nodes < 1 {
		return nil, fmt.Errorf("system redis-masters needs at least one node, got %d", cfg.Nodes)
	}
	nodes := make([]Node, cfg.Nodes)
	for i := range nodes {
		nodes[i] = Node{Name: fmt.Sprintf("n%d", i+1), Role: RoleMaster, Data: true}
	}
	return nodes, nil
}

// Programs implements Topology.
func (mastersTopology) Programs(cfg Config) ([]string, error) { return redisPrograms(cfg) }

// redisPrograms is the redis-server binary of cfg.
func redisPrograms(cfg Config) ([]string, error) {
	bin, err := FindRedisServer(cfg.RedisServer)
	if err != nil {
		return nil, err
	}
	return []string{bin}, nil
}

// Clocks implements Topology: redis-server reads the time through libc, which the shim moves.
func (mastersTopology) Clocks() error { return nil }

// Traits implements Topology: independent masters talk to no other server; CLIENT PAUSE holds writes.
func (mastersTopology) Traits() Traits {
	return Traits{WriteHolds: true, LockSized: true, Server: "redis-server", DiskWaitsWith: PersistAOFAlways, Keys: redisKeys, Cleanup: redisCleanup}
}

// Size implements Topology: the masters are counted by --nodes, which the lock rules on.
func (mastersTopology) Size(s *Size) error {
	if s.Replicas != 0 || s.Sentinels != 0 {
		return fmt.Errorf("--replicas and --sentinels size redis-sentinel, and --lock %s runs on redis-masters: drop them (or use --nodes)", s.Lock)
	}
	return nil
}

func (mastersTopology) persistence(cfg Config) Persistence {
	return persistence(cfg.Persistence)
}

// start runs every master with the redis-server of b (in parallel in containers) and links every
// client group to each, unless direct.
func (mastersTopology) start(ctx context.Context, b *bed, layout []Node) (System, error) {
	if err := mastersUp(ctx, b, layout); err != nil {
		b.backend.Close()
		return nil, err
	}
	return newMasters(b.backend, layout, b.cfg.Groups, b.cfg.Direct)
}

// mastersUp starts the masters and learns their addresses.
func mastersUp(ctx context.Context, b *bed, layout []Node) error {
	specs, err := mastersSpecs(b, layout)
	if err != nil {
		return err
	}
	if err := b.place(ctx, specs); err != nil {
		return fmt.Errorf("start redis-masters%s: %w", b.where(), err)
	}
	var names []string
	for _, n := range layout {
		names = append(names, n.Name)
	}
	if err := b.startTogether(ctx, names); err != nil {
		return fmt.Errorf("start redis-masters%s: %w", b.where(), err)
	}
	for i := range layout {
		layout[i].Addr = b.t.addrOf(layout[i].Name)
	}
	return nil
}

// mastersSpecs are the masters' node specs: on loopback each on a port of its own
// (Config.BasePort.. when given), in a container each on redis's port.
func mastersSpecs(b *bed, layout []Node) ([]nodeSpec, error) {
	var ports []net.Listener
	if b.loopback {
		var err error
		if ports, err = b.reserve(len(layout)); err != nil {
			return nil, err
		}
	}
	bin := b.programs[0]
	specs := make([]nodeSpec, len(layout))
	for i, n := range layout {
		nd := b.nodeDir(n.Name)
		specs[i] = nodeSpec{name: n.Name, dir: nd, idle: redisIdle(bin), port: redisPort, shim: true, data: redisData(nd),
			cmd: append([]string{bin}, RedisArgs("0.0.0.0", redisPort, nd, b.t.persist)...)}
		if b.ssh != nil {
			specs[i].addr, specs[i].port = b.ssh.addr(n.Name), b.ssh.place(n.Name).port
			specs[i].cmd = append([]string{bin}, RedisArgs("0.0.0.0", specs[i].port, nd, b.t.persist)...)
		}
		if b.loopback {
			port := ports[i].Addr().(*net.TCPAddr).Port
			specs[i].addr, specs[i].reserved = ports[i].Addr().String(), ports[i]
			specs[i].cmd = append([]string{bin}, RedisArgs("127.0.0.1", port, nd, b.t.persist)...)
		}
	}
	return specs, nil
}

// redisData are the files of a redis node's data, which a start without data removes.
func redisData(dir string) []string {
	return []string{filepath.Join(dir, "dump.rdb"), filepath.Join(dir, "appendonlydir")}
}

// nodePorts holds count ports for local nodes: BasePort.. when given (each must be free), else
// free ports below the ephemeral range (ReservePorts). Each stays held until its node
// starts, so nothing else this process listens on can take it first.
func nodePorts(count, base int) ([]net.Listener, error) {
	if base == 0 {
		return ReservePorts(count)
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

// persistence is p, or none when unset.
func persistence(p Persistence) Persistence {
	if p == "" {
		return PersistNone
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
		eps[i] = Endpoint{Node: n.Name, Role: n.Role, Addr: l.Addr, Dial: l.Dial, Known: known(n)}
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
	return PingOnce(ctx, addr)
}

// Close implements System.
func (m *masters) Close() error {
	m.links.Close()
	return m.backend.Close()
}
