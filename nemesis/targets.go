package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/systems"
)

// Target kinds every node-targeting nemesis accepts. The holder kinds are lock-aware: they are
// resolved when the fault starts, from the lease the nodes hold right then (as the lock's probe
// reads it), so that interleavings needing a particular lease happen on purpose. The role kinds are
// resolved when the fault starts too, from the roles the system reports right then: after a
// failover "primary" is the promoted replica.
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
	// TargetPrimary: the node the system names primary now.
	TargetPrimary = "primary"
	// TargetReplicas: every replica now.
	TargetReplicas = "replicas"
	// TargetSentinels: every sentinel.
	TargetSentinels = "sentinels"
	// TargetLeader: the member an etcd cluster names leader now.
	TargetLeader = "leader"
	// TargetFollowers: every etcd member but the leader now.
	TargetFollowers = "followers"
)

// TargetKinds lists the target kinds, for parameter checks.
func TargetKinds() []string {
	return []string{TargetOne, TargetMinority, TargetMajority, TargetAll, TargetHolder, TargetHolderOne, TargetHolderMajority,
		TargetPrimary, TargetReplicas, TargetSentinels, TargetLeader, TargetFollowers}
}

// IsLockAware reports whether a target kind is resolved from the current lease.
func IsLockAware(kind string) bool {
	return kind == TargetHolder || kind == TargetHolderOne || kind == TargetHolderMajority
}

// roleOf is the role a role target kind names; empty for other kinds.
func roleOf(kind string) systems.Role {
	switch kind {
	case TargetPrimary:
		return systems.RolePrimary
	case TargetReplicas:
		return systems.RoleReplica
	case TargetSentinels:
		return systems.RoleSentinel
	case TargetLeader:
		return systems.RoleLeader
	case TargetFollowers:
		return systems.RoleFollower
	}
	return ""
}

// IsRoleTarget reports whether a target kind is resolved from the roles the system reports.
func IsRoleTarget(kind string) bool { return roleOf(kind) != "" }

// IsResolved reports whether a target kind is chosen when the fault starts rather than planned.
func IsResolved(kind string) bool { return IsLockAware(kind) || IsRoleTarget(kind) }

// CheckTarget reports whether env can resolve a role target kind: the system must report roles and
// have a node with the role. (A lock-aware kind is checked when it resolves: the lease probe exists
// only once the system runs.)
func CheckTarget(env Env, kind string) error {
	switch {
	case IsRoleTarget(kind):
		if env.Roles == nil {
			return fmt.Errorf("target=%s needs a system that reports roles", kind)
		}
		roles := env.Roles.Roles()
		// An etcd cluster names its leader only once it runs; before, every member is a follower.
		if kind == TargetLeader && len(systems.WithRole(roles, systems.RoleFollower)) > 0 {
			return nil
		}
		if len(systems.WithRole(roles, roleOf(kind))) == 0 {
			have := map[systems.Role]bool{}
			for _, r := range roles {
				have[r] = true
			}
			if have[systems.RoleFollower] {
				have[systems.RoleLeader] = true // elected once the cluster runs
			}
			var targets []string
			for _, k := range []string{TargetPrimary, TargetReplicas, TargetSentinels, TargetLeader, TargetFollowers} {
				if have[roleOf(k)] {
					targets = append(targets, "target="+k)
				}
			}
			if len(targets) == 0 {
				targets = []string{"a count target (one, majority, ...) or a lease target (holder, ...)"}
			}
			return fmt.Errorf("target=%s: the system has no node with role %s (its roles: %v): use %s", kind, roleOf(kind), slices.Sorted(maps.Keys(have)), strings.Join(targets, " or "))
		}
	}
	return nil
}

// RoleNodes lists the nodes a role target kind names now.
func RoleNodes(env Env, kind string) []string {
	if env.Roles == nil {
		return nil
	}
	return systems.WithRole(env.Roles.Roles(), roleOf(kind))
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
type Lease = systems.Lease

// ErrNoLease is returned when no lease of the kind a lock-aware target needs appeared in time.
var ErrNoLease = errors.New("no lease of the wanted shape appeared")

// WaitForLeaseTarget polls the nodes every poll until a lease of the shape kind needs is held, and
// returns the nodes to hit; rng picks among candidates. It gives up after wait.
func WaitForLeaseTarget(ctx context.Context, env Env, rng *rand.Rand, kind string, wait, poll time.Duration) ([]string, Lease, error) {
	if len(env.Keys) == 0 {
		return nil, Lease{}, fmt.Errorf("lock-aware target %s needs the workload's keys", kind)
	}
	if env.Probe == nil {
		return nil, Lease{}, fmt.Errorf("lock-aware target %s needs a lock that offers a lease probe", kind)
	}
	if poll <= 0 {
		poll = 2 * time.Millisecond
	}
	quorum := len(env.Nodes)/2 + 1
	deadline := time.Now().Add(wait)
	for {
		qctx, cancel := context.WithTimeout(ctx, max(poll*10, 50*time.Millisecond))
		leases := env.Probe.Leases(qctx, env.Keys)
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
