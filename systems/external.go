package systems

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/lockpick-dev/lockpick/links"
)

// external is the backend of servers someone else runs. lockpick only talks to them as a client:
// every operation on a node is refused, and Close deletes the run's own keys (those holding its
// unique prefix) and nothing else. It never flushes, kills, pauses or reconfigures a server.
type external struct {
	nodes  []Node
	prefix string
	log    *slog.Logger
	// deleteKeys deletes the run's keys on the servers; Close calls it.
	deleteKeys func() error
}

// ErrExternal is the refusal of every node operation on the external backend.
var ErrExternal = errors.New("runs on --backend external: lockpick never kills, restarts, pauses or reconfigures a server it did not start")

// startExternal checks the endpoints and the run's key prefix, then lets t find its servers.
func startExternal(ctx context.Context, t Topology, cfg Config) (System, error) {
	if err := CheckEndpoints(cfg.Endpoints); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(cfg.KeyPrefix, "lockpick-") || strings.ContainsAny(cfg.KeyPrefix, "*?[]\\") {
		return nil, fmt.Errorf("--backend external needs a unique key prefix lockpick-...: got %q", cfg.KeyPrefix)
	}
	return t.external(ctx, cfg)
}

// external implements Topology: the endpoints are masters n1..nN, each linked to every group.
func (mastersTopology) external(ctx context.Context, cfg Config) (System, error) {
	b := &external{prefix: cfg.KeyPrefix, log: cfg.Logger}
	b.deleteKeys = b.deleteRedisKeys
	for i, ep := range cfg.Endpoints {
		b.nodes = append(b.nodes, Node{Name: fmt.Sprintf("n%d", i+1), Role: RoleMaster, Addr: ep, Data: true})
	}
	for _, n := range b.nodes {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := PingOnce(pctx, n.Addr)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("endpoint %s (%s) does not answer PING: %w: check the address and that the server is up", n.Addr, n.Name, err)
		}
	}
	m, err := newMasters(b, b.nodes, cfg.Groups, cfg.Direct)
	if err != nil {
		return nil, err
	}
	m.external = true
	return m, nil
}

// CheckEndpoints checks a list of host:port endpoints.
func CheckEndpoints(eps []string) error {
	if len(eps) == 0 {
		return fmt.Errorf("--backend external needs the servers: add --endpoints host:port[,host:port...]")
	}
	seen := map[string]bool{}
	for _, ep := range eps {
		host, port, err := net.SplitHostPort(ep)
		if err != nil || host == "" || port == "" {
			return fmt.Errorf("--endpoints %q is not host:port (for example 10.0.0.5:6379)", ep)
		}
		if seen[ep] {
			return fmt.Errorf("--endpoints names %s twice: each endpoint is one node", ep)
		}
		seen[ep] = true
	}
	return nil
}

func (b *external) refuse(node string) error { return fmt.Errorf("node %s %w", node, ErrExternal) }

// Start implements Backend: refused.
func (b *external) Start(_ context.Context, node string) error { return b.refuse(node) }

// StartEmpty implements Backend: refused.
func (b *external) StartEmpty(_ context.Context, node string) error { return b.refuse(node) }

// Kill implements Backend: refused.
func (b *external) Kill(node string) error { return b.refuse(node) }

// Running implements Backend: a server someone else runs is taken to be up.
func (b *external) Running(string) bool { return true }

// Signal implements Backend: refused.
func (b *external) Signal(node string, _ syscall.Signal) error { return b.refuse(node) }

// Pid implements Backend: an external server is no process of lockpick's.
func (b *external) Pid(string) int { return 0 }

// ClockShim implements Backend: an external server's clock is its own.
func (b *external) ClockShim() bool { return false }

// SetClockOffset implements Backend: refused.
func (b *external) SetClockOffset(node string, _ time.Duration) error { return b.refuse(node) }

// ClockOffset implements Backend.
func (b *external) ClockOffset(node string) (time.Duration, error) {
	for _, n := range b.nodes {
		if n.Name == node {
			return MeasureClockOffset(n.Addr)
		}
	}
	return 0, fmt.Errorf("no node %q", node)
}

// Close deletes the run's keys on every endpoint: on redis, SCAN for keys holding the run's prefix
// (the lock keys, and the keys a lock derives from them, such as a fencing token's counter) and
// UNLINK each; on etcd, delete the range the prefix begins.
func (b *external) Close() error { return b.deleteKeys() }

// deleteRedisKeys deletes the run's keys on every redis endpoint.
func (b *external) deleteRedisKeys() error {
	var errs []error
	for _, n := range b.nodes {
		deleted, err := DeleteKeys(context.Background(), n.Addr, b.prefix)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete the run's keys on %s (%s): %w", n.Addr, n.Name, err))
		}
		b.log.Info("deleted the run's keys", "node", n.Name, "addr", n.Addr, "keys", deleted, "match", "*"+b.prefix+"*")
	}
	return errors.Join(errs...)
}

// DeleteKeys unlinks, on the server at addr, every key whose name contains prefix, and returns
// how many it deleted.
func DeleteKeys(ctx context.Context, addr, prefix string) (int, error) {
	if prefix == "" {
		return 0, fmt.Errorf("refusing to delete keys without a prefix")
	}
	admin := AdminClient(addr)
	defer admin.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pattern := "*" + escapeGlob(prefix) + "*"
	n := 0
	var cursor uint64
	for {
		keys, next, err := admin.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return n, err
		}
		if len(keys) > 0 {
			if err := admin.Unlink(ctx, keys...).Err(); err != nil {
				return n, err
			}
			n += len(keys)
		}
		if cursor = next; cursor == 0 {
			return n, nil
		}
	}
}

// escapeGlob escapes the characters SCAN's MATCH treats as a pattern.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// externalSys is a system of servers someone else runs (but redis-masters, which keeps its own
// type): the nodes its topology found at the endpoints, each reached by each client group through
// a link. Roles are not watched: every node keeps the role it was found in.
type externalSys struct {
	name    string
	nodes   []Node
	links   *links.Set
	backend *external
	ping    func(ctx context.Context, addr string) error
	// release closes what the topology opened to find the nodes (an etcd client), after the keys go.
	release func() error
	closed  bool
}

func newExternalSys(name string, nodes []Node, groups []string, b *external, ping func(context.Context, string) error, release func() error) (*externalSys, error) {
	s := &externalSys{name: name, nodes: nodes, links: links.New(), backend: b, ping: ping, release: release}
	for _, n := range nodes {
		for _, g := range groups {
			if _, err := s.links.Add(g, n.Name, n.Addr); err != nil {
				s.links.Close()
				if release != nil {
					release()
				}
				return nil, err
			}
		}
	}
	return s, nil
}

// Name implements System.
func (s *externalSys) Name() string { return s.name }

// Nodes implements System.
func (s *externalSys) Nodes() []Node { return append([]Node(nil), s.nodes...) }

// Roles implements System: the roles the nodes were found in, never updated.
func (s *externalSys) Roles() map[string]Role { return StaticRoles(s.nodes).Roles() }

// Endpoints implements System: each node known by the address it was found at.
func (s *externalSys) Endpoints(group string) ([]Endpoint, error) {
	return groupEndpoints(s.links, group, s.nodes, func(n Node) string { return n.Addr })
}

// Links implements System.
func (s *externalSys) Links() *links.Set { return s.links }

// Backend implements System: every operation on a node is refused.
func (s *externalSys) Backend() Backend { return s.backend }

// Watch implements System: nothing is announced.
func (s *externalSys) Watch(func(Event)) {}

// HoldWrites implements System: refused.
func (s *externalSys) HoldWrites(_ context.Context, node string, _ time.Duration, _ func(context.Context) error) error {
	return fmt.Errorf("holding writes on node %s: it %w", node, ErrExternal)
}

// Ping implements System.
func (s *externalSys) Ping(ctx context.Context, node string) error {
	for _, n := range s.nodes {
		if n.Name == node {
			return s.ping(ctx, n.Addr)
		}
	}
	return fmt.Errorf("no node %q", node)
}

// Close implements System: the run's keys go, the links close; the servers are left as they were.
// It is safe to call more than once.
func (s *externalSys) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.backend.Close()
	s.links.Close()
	if s.release != nil {
		err = errors.Join(err, s.release())
	}
	return err
}
