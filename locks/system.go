package locks

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/systems"
)

// Needs is what a lock needs to run: the system it runs on, and that system's defaults for it.
type Needs struct {
	// System is the system's name (systems.Names).
	System string
	// Nodes is the default number of masters on redis-masters; zero for other systems.
	Nodes int
}

// NeedsOf tells what the named lock needs.
func NeedsOf(name string) (Needs, error) {
	k, err := Lookup(name)
	if err != nil {
		return Needs{}, err
	}
	return Needs{System: k.System, Nodes: k.Nodes}, nil
}

// ProbeCloser is a lease probe holding connections that Close releases.
type ProbeCloser interface {
	systems.LeaseProbe
	Close() error
}

// NewProbe builds the named lock's lease probe over the nodes of its system. Every lock here keeps
// a lease as one Redis key holding the lease's value, on every node that stores data (a replica
// holds a copy once replication brought it), so the probe reads the keys there, over the nodes'
// own addresses: a fault on a client's path must not hide a lease from the nemesis.
func NewProbe(name string, nodes []systems.Node) (ProbeCloser, error) {
	k, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if k.Probe != nil {
		return k.Probe(nodes)
	}
	return newKeyProbe(nodes)
}

// newKeyProbe reads lease keys on the data nodes.
func newKeyProbe(nodes []Node) (*keyProbe, error) {
	p := &keyProbe{clients: map[string]*redis.Client{}}
	for _, n := range nodes {
		if n.Data {
			p.nodes = append(p.nodes, n.Name)
			p.clients[n.Name] = systems.AdminClient(n.Addr)
		}
	}
	if len(p.nodes) == 0 {
		return nil, fmt.Errorf("the system has no node that stores data")
	}
	return p, nil
}

// keyProbe reads lease keys on the data nodes.
type keyProbe struct {
	nodes   []string
	clients map[string]*redis.Client
	// hash: a lease is a hash whose fields are its holders (watchdog locks), not a string value.
	hash bool
	// keyName maps a lock key to the key the lock stores it under; nil means the same name.
	keyName func(string) string
	// hexValues: leases name their values hex-encoded (a library's binary values).
	hexValues bool
}

// read returns key -> the lease values one node holds.
func (p *keyProbe) read(ctx context.Context, c *redis.Client, keys []string) (map[string][]string, error) {
	out := map[string][]string{}
	if !p.hash {
		names := keys
		if p.keyName != nil {
			names = make([]string, len(keys))
			for i, k := range keys {
				names[i] = p.keyName(k)
			}
		}
		vals, err := c.MGet(ctx, names...).Result()
		if err != nil {
			return nil, err
		}
		for i, v := range vals {
			if s, ok := v.(string); ok {
				if p.hexValues {
					s = hex.EncodeToString([]byte(s))
				}
				out[keys[i]] = append(out[keys[i]], s)
			}
		}
		return out, nil
	}
	for _, k := range keys {
		fields, err := c.HKeys(ctx, k).Result()
		if err != nil {
			return nil, err
		}
		out[k] = fields
	}
	return out, nil
}

// Leases implements systems.LeaseProbe.
func (p *keyProbe) Leases(ctx context.Context, keys []string) []systems.Lease {
	type copyOf struct{ node, key, value string }
	var mu sync.Mutex
	var copies []copyOf
	var wg sync.WaitGroup
	for _, n := range p.nodes {
		wg.Go(func() {
			held, err := p.read(ctx, p.clients[n], keys)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys {
				for _, v := range held[k] {
					copies = append(copies, copyOf{n, k, v})
				}
			}
		})
	}
	wg.Wait()
	byLease := map[[2]string]int{}
	var leases []systems.Lease
	for _, c := range copies {
		id := [2]string{c.key, c.value}
		i, ok := byLease[id]
		if !ok {
			i = len(leases)
			byLease[id] = i
			leases = append(leases, systems.Lease{Key: c.key, Value: c.value})
		}
		leases[i].Nodes = append(leases[i].Nodes, c.node)
	}
	for i := range leases {
		slices.Sort(leases[i].Nodes)
	}
	slices.SortStableFunc(leases, func(a, b systems.Lease) int { return len(b.Nodes) - len(a.Nodes) })
	return leases
}

// Close releases the probe's connections.
func (p *keyProbe) Close() error {
	var errs []error
	for _, c := range p.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
