package systems

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// external implements Topology: the endpoints are the members e1..eN, each reached by each client
// group through a link. Roles are not watched (lockpick did not start the members and moves no
// fault to them): every member reports as a follower.
func (etcdTopology) external(ctx context.Context, cfg Config) (System, error) {
	var nodes []Node
	for i, ep := range cfg.Endpoints {
		nodes = append(nodes, Node{Name: fmt.Sprintf("e%d", i+1), Role: RoleFollower, Addr: ep, Data: true})
	}
	admin, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	ping := func(ctx context.Context, addr string) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := admin.Status(ctx, addr)
		return err
	}
	for _, n := range nodes {
		if err := ping(ctx, n.Addr); err != nil {
			admin.Close()
			return nil, fmt.Errorf("endpoint %s (%s) does not answer a status request: %w: check the address and that the member is up", n.Addr, n.Name, err)
		}
	}
	b := &external{nodes: nodes, prefix: cfg.KeyPrefix, log: cfg.Logger}
	b.deleteKeys = func() error { return deleteEtcdKeys(admin, cfg) }
	return newExternalSys("etcd", nodes, cfg.Groups, b, ping, admin.Close)
}

// deleteEtcdKeys deletes the range the run's key prefix begins.
func deleteEtcdKeys(admin *clientv3.Client, cfg Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := admin.Delete(ctx, cfg.KeyPrefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("delete the run's keys (prefix %s): %w", cfg.KeyPrefix, err)
	}
	cfg.Logger.Info("deleted the run's keys", "keys", r.Deleted, "prefix", cfg.KeyPrefix)
	return nil
}
