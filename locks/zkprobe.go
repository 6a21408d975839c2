package locks

import (
	"context"
	"fmt"
	"io"
	"log"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockpick-dev/lockpick/systems"
)

// The parents of the ZooKeeper clients' lock nodes, one child per key: they must match
// clients/java/CuratorLock.java's ROOT and clients/python/kazoo_lock.py's ROOT.
const (
	curatorRoot = "/lockpick-curator/"
	kazooRoot   = "/lockpick-kazoo/"
)

// curatorProbe and kazooProbe read who holds each key in ZooKeeper.
func curatorProbe(nodes []Node) (ProbeCloser, error) { return newZKProbe(nodes, curatorRoot) }
func kazooProbe(nodes []Node) (ProbeCloser, error)   { return newZKProbe(nodes, kazooRoot) }

// zkProbe reads a ZooKeeper lock recipe's holders: under ROOT+KEY every contender has an ephemeral
// sequential node, and the lowest sequence holds the lock. The lease's value is that node's path,
// as the clients name their leases. ZooKeeper replicates every node to every member, so a lease
// is on all of them.
type zkProbe struct {
	conn  *zk.Conn
	root  string
	nodes []string
}

func newZKProbe(nodes []Node, root string) (*zkProbe, error) {
	p := &zkProbe{root: root}
	var addrs []string
	for _, n := range nodes {
		p.nodes = append(p.nodes, n.Name)
		addrs = append(addrs, n.Addr)
	}
	// The nodes' own addresses, so that a fault on a client's path never hides a lease.
	conn, _, err := zk.Connect(addrs, 4*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		return nil, fmt.Errorf("zookeeper probe: %w", err)
	}
	p.conn = conn
	return p, nil
}

// Leases implements systems.LeaseProbe. go-zookeeper's calls take no context: a call that
// outlives ctx is abandoned to finish by itself.
func (p *zkProbe) Leases(ctx context.Context, keys []string) []systems.Lease {
	type result struct{ leases []systems.Lease }
	done := make(chan result, 1)
	go func() {
		var out []systems.Lease
		for _, key := range keys {
			children, _, err := p.conn.Children(p.root + key)
			if err != nil || len(children) == 0 {
				continue
			}
			holder := slices.MinFunc(children, func(a, b string) int { return strings.Compare(sequence(a), sequence(b)) })
			out = append(out, systems.Lease{Key: key, Value: p.root + key + "/" + holder, Nodes: slices.Clone(p.nodes)})
		}
		done <- result{out}
	}()
	select {
	case r := <-done:
		return r.leases
	case <-ctx.Done():
		return nil
	}
}

// sequence is the ten-digit sequence ZooKeeper appended to a sequential node's name.
func sequence(name string) string {
	if len(name) < 10 {
		return name
	}
	return name[len(name)-10:]
}

// Close implements ProbeCloser.
func (p *zkProbe) Close() error {
	p.conn.Close()
	return nil
}
