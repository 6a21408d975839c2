package systems

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockpick-dev/lockpick/links"
)

// externalEtcd is an etcd cluster someone else runs: its members are the endpoints, each reached
// by each client group through a link. Roles are not watched (lockpick did not start the members and
// moves no fault to them): every member reports as a follower.
type externalEtcd struct {
	nodes   []Node
	links   *links.Set
	admin   *clientv3.Client
	backend *external
}

// external implements Topology: the endpoints are the members e1..eN.
func (etcdTopology) external(ctx context.Context, cfg Config) (_ System, err error) {
	s := &externalEtcd{links: links.New()}
	defer func() {
		if err != nil {
			s.links.Close()
			if s.admin != nil {
				s.admin.Close()
			}
		}
	}()
	for i, ep := range cfg.Endpoints {
		s.nodes = append(s.nodes, Node{Name: fmt.Sprintf("e%d", i+1), Role: RoleFollower, Addr: ep, Data: true})
	}
	if s.admin, err = clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}); err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	for _, n := range s.nodes {
		if err := s.Ping(ctx, n.Name); err != nil {
			return nil, fmt.Errorf("endpoint %s (%s) does not answer a status request: %w: check the address and that the member is up", n.Addr, n.Name, err)
		}
		for _, g := range cfg.Groups {
			if _, err := s.links.Add(g, n.Name, n.Addr); err != nil {
				return nil, err
			}
		}
	}
	s.backend = &external{nodes: s.nodes, prefix: cfg.KeyPrefix, log: cfg.Logger}
	s.backend.deleteKeys = func() error {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := s.admin.Delete(dctx, cfg.KeyPrefix, clientv3.WithPrefix())
		if err != nil {
			return fmt.Errorf("delete the run's keys (prefix %s): %w", cfg.KeyPrefix, err)
		}
		cfg.Logger.Info("deleted the run's keys", "keys", r.Deleted, "prefix", cfg.KeyPrefix)
		return nil
	}
	return s, nil
}

// Name implements System.
func (s *externalEtcd) Name() string { return "etcd" }

// Nodes implements System.
func (s *externalEtcd) Nodes() []Node { return append([]Node(nil), s.nodes...) }

// Roles implements System: the roles the members started with here, never updated.
func (s *externalEtcd) Roles() map[string]Role { return StaticRoles(s.nodes).Roles() }

// Endpoints implements System.
func (s *externalEtcd) Endpoints(group string) ([]Endpoint, error) {
	return groupEndpoints(s.links, group, s.nodes, func(n Node) string { return n.Addr })
}

// Links implements System.
func (s *externalEtcd) Links() *links.Set { return s.links }

// Backend implements System: every operation on a member is refused.
func (s *externalEtcd) Backend() Backend { return s.backend }

// Watch implements System: nothing is announced.
func (s *externalEtcd) Watch(func(Event)) {}

// HoldWrites implements System: refused.
func (s *externalEtcd) HoldWrites(_ context.Context, node string, _ time.Duration, _ func(context.Context) error) error {
	return fmt.Errorf("holding writes on member %s: it %w", node, ErrExternal)
}

// Ping implements System: the member answers a status request.
func (s *externalEtcd) Ping(ctx context.Context, node string) error {
	for _, n := range s.nodes {
		if n.Name == node {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := s.admin.Status(ctx, n.Addr)
			return err
		}
	}
	return fmt.Errorf("no member %q", node)
}

// Close implements System: the run's keys go, the links close; the members are left as they were.
func (s *externalEtcd) Close() error {
	if s.admin == nil {
		return nil
	}
	err := s.backend.Close()
	s.links.Close()
	err = errors.Join(err, s.admin.Close())
	s.admin = nil
	return err
}
