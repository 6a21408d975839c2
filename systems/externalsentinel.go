package systems

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// external implements Topology: the endpoints are sentinels, and the primary, its replicas and the
// other sentinels are what they report for the master name when the run starts. Each node is known
// by the address the sentinels announce, and reached by each client group through a link. Roles
// are not watched.
func (sentinelTopology) external(ctx context.Context, cfg Config) (System, error) {
	name := cfg.MasterName
	if name == "" {
		return nil, fmt.Errorf("--backend external with a sentinel lock needs --master-name, the name the sentinels monitor the primary under")
	}
	nodes, err := discover(ctx, cfg.Endpoints, name)
	if err != nil {
		return nil, err
	}
	b := &external{nodes: nodes, prefix: cfg.KeyPrefix, log: cfg.Logger}
	b.deleteKeys = func() error { return deleteSentinelKeys(b, name) }
	return newExternalSys("redis-sentinel", nodes, cfg.Groups, b, PingOnce, nil)
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

// deleteSentinelKeys deletes the run's keys on the primary the sentinels name now (replicas refuse
// writes and copy the deletes).
func deleteSentinelKeys(b *external, master string) error {
	var sentinels []string
	for _, n := range b.nodes {
		if n.Role == RoleSentinel {
			sentinels = append(sentinels, n.Addr)
		}
	}
	nodes, err := discover(context.Background(), sentinels, master)
	if err != nil {
		return fmt.Errorf("delete the run's keys: %w", err)
	}
	deleted, err := DeleteKeys(context.Background(), nodes[0].Addr, b.prefix)
	b.log.Info("deleted the run's keys", "primary", nodes[0].Addr, "keys", deleted, "match", "*"+b.prefix+"*")
	return err
}
