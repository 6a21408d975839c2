package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Target kinds every node-targeting nemesis accepts. The holder kinds are lock-aware: they are
// resolved when the fault starts, from the lease the nodes hold right then (read over the admin
// connections), so that interleavings needing a particular lease happen on purpose.
const (
	TargetOne      = "one"      // one node at random
	TargetMinority = "minority" // a random minority (at least one node)
	TargetMajority = "majority" // a random bare majority
	TargetAll      = "all"      // every node
	// TargetHolder: every node that holds the current lease.
	TargetHolder = "holder"
	// TargetHolderOne: one node of a lease that is held by a bare majority, so that the fault on
	// that node alone lets another client build a majority (Kleppmann's clock scenario).
	TargetHolderOne = "holder-one"
	// TargetHolderMajority: a majority of the nodes that hold the current lease.
	TargetHolderMajority = "holder-majority"
)

// TargetKinds lists the target kinds, for parameter checks.
func TargetKinds() []string {
	return []string{TargetOne, TargetMinority, TargetMajority, TargetAll, TargetHolder, TargetHolderOne, TargetHolderMajority}
}

// IsLockAware reports whether a target kind is resolved from the current lease.
func IsLockAware(kind string) bool {
	return kind == TargetHolder || kind == TargetHolderOne || kind == TargetHolderMajority
}

// PickNodes draws the nodes of a static target kind. It is deterministic in rng.
func PickNodes(rng *rand.Rand, nodes []string, kind string) []string {
	n := len(nodes)
	var k int
	switch kind {
	case TargetOne:
		k = 1
	case TargetMinority:
		k = max(1, (n-1)/2)
		if n > 2 {
			k = 1 + rng.IntN((n-1)/2)
		}
	case TargetMajority:
		k = n/2 + 1
	case TargetAll:
		k = n
	default:
		return nil
	}
	perm := rng.Perm(n)[:min(k, n)]
	out := make([]string, len(perm))
	for i, j := range perm {
		out[i] = nodes[j]
	}
	slices.Sort(out)
	return out
}

// Lease is a lease as the nodes hold it: the key, the value, and the nodes whose copy of the key
// holds that value.
type Lease struct {
	Key   string
	Value string
	Nodes []string
}

// CurrentLeases reads every key on every node over the admin connections and groups the copies by
// value. Nodes that do not answer are left out.
func CurrentLeases(ctx context.Context, admin map[string]*redis.Client, nodes, keys []string) []Lease {
	type copyOf struct{ node, key, value string }
	var mu sync.Mutex
	var copies []copyOf
	var wg sync.WaitGroup
	for _, n := range nodes {
		c := admin[n]
		if c == nil {
			continue
		}
		wg.Go(func() {
			vals, err := c.MGet(ctx, keys...).Result()
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for i, v := range vals {
				if s, ok := v.(string); ok {
					copies = append(copies, copyOf{n, keys[i], s})
				}
			}
		})
	}
	wg.Wait()
	byLease := map[[2]string]*Lease{}
	var out []*Lease
	for _, c := range copies {
		id := [2]string{c.key, c.value}
		l := byLease[id]
		if l == nil {
			l = &Lease{Key: c.key, Value: c.value}
			byLease[id] = l
			out = append(out, l)
		}
		l.Nodes = append(l.Nodes, c.node)
	}
	leases := make([]Lease, len(out))
	for i, l := range out {
		slices.Sort(l.Nodes)
		leases[i] = *l
	}
	slices.SortFunc(leases, func(a, b Lease) int { return len(b.Nodes) - len(a.Nodes) })
	return leases
}

// ErrNoLease is returned when no lease of the kind a lock-aware target needs appeared in time.
var ErrNoLease = errors.New("no lease of the wanted shape appeared")

// WaitForLeaseTarget polls the nodes every poll until a lease of the shape kind needs is held, and
// returns the nodes to hit; rng picks among candidates. It gives up after wait.
func WaitForLeaseTarget(ctx context.Context, env Env, rng *rand.Rand, kind string, wait, poll time.Duration) ([]string, Lease, error) {
	if len(env.Keys) == 0 {
		return nil, Lease{}, fmt.Errorf("lock-aware target %s needs the workload's keys", kind)
	}
	if poll <= 0 {
		poll = 2 * time.Millisecond
	}
	quorum := len(env.Nodes)/2 + 1
	deadline := time.Now().Add(wait)
	for {
		qctx, cancel := context.WithTimeout(ctx, max(poll*10, 50*time.Millisecond))
		leases := CurrentLeases(qctx, env.Admin, env.Nodes, env.Keys)
		cancel()
		for _, l := range leases {
			switch kind {
			case TargetHolder:
				return l.Nodes, l, nil
			case TargetHolderOne:
				// Only a bare majority makes one node decisive; with more copies the fault on one
				// node cannot let another client in.
				if len(l.Nodes) == quorum {
					return []string{l.Nodes[rng.IntN(len(l.Nodes))]}, l, nil
				}
			case TargetHolderMajority:
				if len(l.Nodes) >= quorum {
					perm := rng.Perm(len(l.Nodes))[:quorum]
					out := make([]string, quorum)
					for i, j := range perm {
						out[i] = l.Nodes[j]
					}
					slices.Sort(out)
					return out, l, nil
				}
			default:
				return nil, Lease{}, fmt.Errorf("target %q is not lock-aware", kind)
			}
		}
		if time.Now().After(deadline) {
			return nil, Lease{}, fmt.Errorf("%w within %v (target %s)", ErrNoLease, wait, kind)
		}
		select {
		case <-ctx.Done():
			return nil, Lease{}, ctx.Err()
		case <-time.After(poll):
		}
	}
}
