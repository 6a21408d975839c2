package systems

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/links"
)

// externalSentinel is a Sentinel deployment someone else runs: the endpoints are sentinels, and the
// primary, its replicas and the other sentinels are what they report for the master name when the
// run starts. Each node is known by the address the sentinels announce, and reached by each client
// group through a link. Roles are not watched.
type externalSentinel struct {
	nodes   []Node
	links   *links.Set
	master  string
	backend *external
}

// external implements Topology: the endpoints are sentinels, which name the rest.
func (sentinelTopology) external(ctx context.Context, cfg Config) (_ System, err error) {
	name := cfg.MasterName
	if name == "" {
		return nil, fmt.Errorf("--backend external with a sentinel lock needs --master-name, the name the sentinels monitor the primary under")
	}
	s := &externalSentinel{links: links.New(), master: name}
	defer func() {
		if err != nil {
			s.links.Close()
		}
	}()
	if s.nodes, err = discover(ctx, cfg.Endpoints, name); err != nil {
		return nil, err
	}
	for _, n := range s.nodes {
		for _, g := range cfg.Groups {
			if _, err := s.links.Add(g, n.Name, n.Addr); err != nil {
				return nil, err
			}
		}
	}
	s.backend = &external{nodes: s.nodes, prefix: cfg.KeyPrefix, log: cfg.Logger}
	s.backend.deleteKeys = s.deleteKeys
	return s, nil
}

// discover asks the first sentinel that answers for the primary, the replicas and the sentinels of
// the master name: n1 the primary, n2.. the replicas, s1.. the sentinels (the endpoints first).
func discover(ctx context.Context, sentinels []string, name string) ([]Node, error) {
	var errs []error
	for _, ep := range sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: ep, MaxRetries: -1, DialerRetries: 1, DisableIdentity: true, Protocol: 2})
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		nodes, err := discoverFrom(qctx, sc, sentinels, name)
		cancel()
		sc.Close()
		if err == nil {
			return nodes, nil
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %w", ep, err))
	}
	return nil, fmt.Errorf("no sentinel named the master %q: %w", name, errors.Join(errs...))
}

func discoverFrom(ctx context.Context, sc *redis.SentinelClient, sentinels []string, name string) ([]Node, error) {
	addr, err := sc.GetMasterAddrByName(ctx, name).Result()
	if err != nil {
		return nil, err
	}
	nodes := []Node{{Name: "n1", Role: RolePrimary, Addr: net.JoinHostPort(addr[0], addr[1]), Data: true}}
	replicas, err := sc.Replicas(ctx, name).Result()
	if err != nil {
		return nil, err
	}
	for _, r := range replicas {
		nodes = append(nodes, Node{Name: fmt.Sprintf("n%d", len(nodes)+1), Role: RoleReplica, Addr: net.JoinHostPort(r["ip"], r["port"]), Data: true})
	}
	known := slices.Clone(sentinels)
	others, err := sc.Sentinels(ctx, name).Result()
	if err != nil {
		return nil, err
	}
	for _, o := range others {
		// go-redis learns the other sentinels from these answers and dials them by these addresses.
		if a := net.JoinHostPort(o["ip"], o["port"]); !slices.Contains(known, a) {
			known = append(known, a)
		}
	}
	for i, a := range known {
		nodes = append(nodes, Node{Name: fmt.Sprintf("s%d", i+1), Role: RoleSentinel, Addr: a})
	}
	return nodes, nil
}

// deleteKeys deletes the run's keys on the primary the sentinels name now (replicas refuse writes
// and copy the deletes).
func (s *externalSentinel) deleteKeys() error {
	var sentinels []string
	for _, n := range s.nodes {
		if n.Role == RoleSentinel {
			sentinels = append(sentinels, n.Addr)
		}
	}
	nodes, err := discover(context.Background(), sentinels, s.master)
	if err != nil {
		return fmt.Errorf("delete the run's keys: %w", err)
	}
	deleted, err := DeleteKeys(context.Background(), nodes[0].Addr, s.backend.prefix)
	s.backend.log.Info("deleted the run's keys", "primary", nodes[0].Addr, "keys", deleted, "match", "*"+s.backend.prefix+"*")
	return err
}

// Name implements System.
func (s *externalSentinel) Name() string { return "redis-sentinel" }

// Nodes implements System.
func (s *externalSentinel) Nodes() []Node { return append([]Node(nil), s.nodes...) }

// Roles implements System: the roles the sentinels reported when the run started.
func (s *externalSentinel) Roles() map[string]Role { return StaticRoles(s.nodes).Roles() }

// Endpoints implements System: each node known by the address the sentinels announce.
func (s *externalSentinel) Endpoints(group string) ([]Endpoint, error) {
	return groupEndpoints(s.links, group, s.nodes, func(n Node) string { return n.Addr })
}

// Links implements System.
func (s *externalSentinel) Links() *links.Set { return s.links }

// Backend implements System: every operation on a node is refused.
func (s *externalSentinel) Backend() Backend { return s.backend }

// Watch implements System: nothing is announced.
func (s *externalSentinel) Watch(func(Event)) {}

// HoldWrites implements System: refused.
func (s *externalSentinel) HoldWrites(_ context.Context, node string, _ time.Duration, _ func(context.Context) error) error {
	return fmt.Errorf("holding writes on node %s: it %w", node, ErrExternal)
}

// Ping implements System.
func (s *externalSentinel) Ping(ctx context.Context, node string) error {
	for _, n := range s.nodes {
		if n.Name == node {
			return PingOnce(ctx, n.Addr)
		}
	}
	return fmt.Errorf("no node %q", node)
}

// Close implements System: the run's keys go, the links close.
func (s *externalSentinel) Close() error {
	if s.backend == nil {
		return nil
	}
	err := s.backend.Close()
	s.backend = nil
	s.links.Close()
	return err
}
