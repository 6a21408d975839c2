package nemesis

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/systems"
)

// roleMap is a role view that a test changes between faults, as a failover would.
type roleMap map[string]systems.Role

func (r roleMap) Roles() map[string]systems.Role { return r }

// A role-targeted partition cuts the groups from the node that holds the role when the fault starts,
// heals exactly those paths, and follows the role to the promoted node on the next fault.
func TestPartitionTargetFollowsThePrimary(t *testing.T) {
	roles := roleMap{"n1": systems.RolePrimary, "n2": systems.RoleReplica, "n3": systems.RoleReplica}
	env := Env{Nodes: []string{"n1", "n2", "n3"}, Groups: []string{"c1", "c2"}, Roles: roles, TTL: time.Second, Interval: time.Second}
	spec, err := ParseSpec("partition:target=primary:group=c2")
	if err != nil {
		t.Fatal(err)
	}
	n, err := Build(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	p := n.(*Partition)
	plan := p.Plan(rand.New(rand.NewPCG(1, 2)), 10*time.Second)
	if len(plan) < 4 || plan[0].F != "cut" || len(plan[0].Nodes) != 0 || plan[1].F != "heal" {
		t.Fatalf("plan %v: want unresolved cut/heal pairs", plan)
	}
	ctx := context.Background()
	cut, _ := p.Resolve(ctx, plan[0])
	if cut.F != "cut c2/n1" {
		t.Fatalf("cut resolved to %q, want cut c2/n1", cut.F)
	}
	roles["n1"], roles["n3"] = systems.RoleReplica, systems.RolePrimary
	heal, _ := p.Resolve(ctx, plan[1])
	if heal.F != "heal c2/n1" {
		t.Fatalf("heal resolved to %q, want the cut's own paths, heal c2/n1", heal.F)
	}
	if next, _ := p.Resolve(ctx, plan[2]); next.F != "cut c2/n3" {
		t.Fatalf("after the failover the cut resolved to %q, want cut c2/n3", next.F)
	}
	if _, err := Build(mustSpec(t, "partition:target=sentinels"), env); err == nil {
		t.Fatal("target=sentinels accepted: clients are cut from data nodes only")
	}
}

func mustSpec(t *testing.T, s string) Spec {
	t.Helper()
	spec, err := ParseSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}
