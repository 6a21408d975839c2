package systems

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// LocalConfig describes redis-server nodes run as local child processes outside any System: the
// counter workload's resource node, and tests that need a bare node. Zero values take defaults.
type LocalConfig struct {
	// Nodes is how many redis-server nodes to run.
	Nodes int
	// Dir holds one subdirectory per node (its data and its log).
	Dir string
	// BasePort, when not zero, puts node i on BasePort+i; zero picks free ports.
	BasePort int
	// Persistence applies to every node; empty means none.
	Persistence Persistence
	// RedisServer is the redis-server binary; empty looks it up on PATH. Its base name must stay
	// redis-server: Redis picks its mode from argv[0].
	RedisServer string
	// Logger receives node lifecycle messages; nil discards them.
	Logger *slog.Logger
	// ClockShim, when set, is the clock shim library (see FindClockShim) every node is started with,
	// each reading its offset from clock.offset in its own directory.
	ClockShim string
	// NamePrefix names the nodes: prefix1, prefix2, ...; empty means "n".
	NamePrefix string
}

// LocalNode is one redis-server of Local.
type LocalNode struct {
	Name string
	Port int
	// Dir is the node's directory, absolute.
	Dir string
}

// Addr is the node's loopback address.
func (n *LocalNode) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Port)) }

// Admin opens a client straight to the node, bypassing every link: the harness's own connection.
func (n *LocalNode) Admin() *redis.Client { return AdminClient(n.Addr()) }

// Local is redis-server nodes as local child processes: redis-masters' nodes on the local backend,
// without links. It is a Backend.
type Local struct {
	*table
	nodes []*LocalNode
}

// StartLocal starts every node and waits until each answers PING. On error, nothing is left running.
func StartLocal(ctx context.Context, cfg LocalConfig) (*Local, error) {
	if cfg.Nodes < 1 {
		return nil, fmt.Errorf("a cluster needs at least one node, got %d", cfg.Nodes)
	}
	if cfg.Logger == nil {
		cfg.Logger = nopLogger()
	}
	if cfg.NamePrefix == "" {
		cfg.NamePrefix = "n"
	}
	b, err := openBed(ctx, mastersTopology{}, Config{Dir: cfg.Dir, BasePort: cfg.BasePort, Persistence: cfg.Persistence,
		RedisServer: cfg.RedisServer, Logger: cfg.Logger, ClockShim: cfg.ClockShim})
	if err != nil {
		return nil, err
	}
	layout := make([]Node, cfg.Nodes)
	for i := range layout {
		layout[i] = Node{Name: fmt.Sprintf("%s%d", cfg.NamePrefix, i+1), Role: RoleMaster, Data: true}
	}
	if err := mastersUp(ctx, b, layout); err != nil {
		b.backend.Close()
		return nil, err
	}
	l := &Local{table: b.t}
	for _, n := range layout {
		_, port, _ := net.SplitHostPort(n.Addr)
		p, _ := strconv.Atoi(port)
		l.nodes = append(l.nodes, &LocalNode{Name: n.Name, Port: p, Dir: b.nodeDir(n.Name)})
	}
	return l, nil
}

// Nodes lists the nodes in order.
func (l *Local) Nodes() []*LocalNode { return append([]*LocalNode(nil), l.nodes...) }

// Node returns the node with the given name.
func (l *Local) Node(name string) (*LocalNode, error) {
	for _, n := range l.Nodes() {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node %q", name)
}
