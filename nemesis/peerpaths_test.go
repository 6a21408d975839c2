package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/systems"
)

// recordingCutter records the cuts a nemesis asks a backend for: it stands for the docker backend's
// rules, which the systems package's docker tests exercise on real containers.
type recordingCutter struct {
	mu  sync.Mutex
	cut map[string]string // from->to -> mode
	log []string
}

func (r *recordingCutter) CutPeer(_ context.Context, from, to, mode string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut[from+"->"+to] = mode
	r.log = append(r.log, fmt.Sprintf("cut %s->%s %s", from, to, mode))
	return nil
}

func (r *recordingCutter) HealPeer(_ context.Context, from, to string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cut, from+"->"+to)
	r.log = append(r.log, fmt.Sprintf("heal %s->%s", from, to))
	return nil
}

// On a backend that cuts the paths between servers itself, partition:paths=peers cuts every path to
// and from the leader there (not on links, of which there are none), in its mode, and heals them all.
func TestPartitionPeersUseTheBackendsCutter(t *testing.T) {
	rc := &recordingCutter{cut: map[string]string{}}
	roles := roleMap{"e1": systems.RoleFollower, "e2": systems.RoleLeader, "e3": systems.RoleFollower}
	env := Env{Nodes: []string{"e1", "e2", "e3"}, Groups: []string{"c1"}, Roles: roles, TTL: time.Second, Interval: time.Second, Peers: rc}
	n := build(t, "partition:target=leader:paths=peers:mode=reset", env)
	plan := n.Plan(rand.New(rand.NewPCG(1, 2)), 5*time.Second)
	ctx := context.Background()
	cut, err := n.(Resolver).Resolve(ctx, plan[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Apply(ctx, cut); err != nil {
		t.Fatal(err)
	}
	want := []string{"e1->e2", "e2->e1", "e2->e3", "e3->e2"}
	var got []string
	for k, mode := range rc.cut {
		got = append(got, k)
		if mode != ModeReset {
			t.Fatalf("path %s cut in mode %s, want reset", k, mode)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("cut %v, want %v (log %v)", got, want, rc.log)
	}
	for _, op := range n.Healing() {
		if err := n.Apply(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	if len(rc.cut) != 0 || n.Healing() != nil {
		t.Fatalf("after the heal %v still cut", rc.cut)
	}
}

// The failover's stall and isolation on such a backend are cuts in mode drop (a dropped path holds
// TCP's data back as a stall does), healed by unstall.
func TestFailoverStallUsesTheBackendsCutter(t *testing.T) {
	rc := &recordingCutter{cut: map[string]string{}}
	roles := roleMap{"n1": systems.RolePrimary, "n2": systems.RoleReplica, "n3": systems.RoleReplica, "s1": systems.RoleSentinel}
	env := Env{Nodes: []string{"n1", "n2", "n3"}, Groups: []string{"c1"}, Roles: roles, TTL: time.Second, Interval: time.Second, Peers: rc}
	f := build(t, "failover", env).(*Failover)
	ctx := context.Background()
	stall, err := f.Resolve(ctx, Op{F: "stall"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Apply(ctx, stall); err != nil {
		t.Fatal(err)
	}
	if rc.cut["n2->n1"] != ModeDrop || rc.cut["n3->n1"] != ModeDrop || len(rc.cut) != 2 {
		t.Fatalf("stall cut %v, want n2->n1 and n3->n1 dropped", rc.cut)
	}
	unstall, _ := f.Resolve(ctx, Op{F: "unstall"})
	if err := f.Apply(ctx, unstall); err != nil {
		t.Fatal(err)
	}
	if len(rc.cut) != 0 {
		t.Fatalf("unstall left %v cut", rc.cut)
	}
}

// Latency on the paths between servers needs proxies on them, or a backend that slows them: on a
// backend whose servers talk over their own interfaces and that cannot slow them, it is refused,
// saying what works instead.
func TestPeerLatencyRefusedWithoutASlower(t *testing.T) {
	env := Env{Nodes: []string{"e1", "e2", "e3"}, Groups: []string{"c1"}, TTL: time.Second, Interval: time.Second, NodeTimeout: time.Second,
		Peers: &recordingCutter{cut: map[string]string{}}}
	s, err := ParseSpec("latency:paths=peers:delay=300ms")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build(s, env); err == nil || !strings.Contains(err.Error(), "use latency on the client paths") {
		t.Fatalf("latency:paths=peers on docker: %v, want a refusal", err)
	}
	s, _ = ParseSpec("latency:delay=300ms")
	if _, err := Build(s, env); err != nil {
		t.Fatalf("latency on the client paths on docker: %v", err)
	}
}

// recordingSlower records the slowdowns a nemesis asks a backend for: it stands for the local
// Engine's packet queues, which the systems package's docker tests measure on real containers.
type recordingSlower struct {
	mu   sync.Mutex
	slow map[string]string // from->to -> "delay jitter"
}

func (r *recordingSlower) SlowPeer(_ context.Context, from, to string, delay, jitter time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slow[from+"->"+to] = fmt.Sprint(delay, " ", jitter)
	return nil
}

func (r *recordingSlower) UnslowPeer(_ context.Context, from, to string) (systems.PeerSlowStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.slow, from+"->"+to)
	return systems.PeerSlowStats{}, nil
}

// On a backend that slows the paths between servers itself, latency:paths=peers slows every path to
// and from the leader there, by the delay and jitter asked (the round trip's, as a link's toxics
// add up to), and restores them all.
func TestPeerLatencyUsesTheBackendsSlower(t *testing.T) {
	rs := &recordingSlower{slow: map[string]string{}}
	roles := roleMap{"e1": systems.RoleFollower, "e2": systems.RoleLeader, "e3": systems.RoleFollower}
	env := Env{Nodes: []string{"e1", "e2", "e3"}, Groups: []string{"c1"}, Roles: roles, TTL: time.Second, Interval: time.Second,
		NodeTimeout: time.Second, Peers: &recordingCutter{cut: map[string]string{}}, Slow: rs}
	n := build(t, "latency:target=leader:paths=peers:delay=300ms:mode=steady", env)
	plan := n.Plan(rand.New(rand.NewPCG(1, 2)), 5*time.Second)
	ctx := context.Background()
	op, err := n.(Resolver).Resolve(ctx, plan[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Apply(ctx, op); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"e1->e2": "300ms 75ms", "e2->e1": "300ms 75ms", "e2->e3": "300ms 75ms", "e3->e2": "300ms 75ms"}
	if fmt.Sprint(rs.slow) != fmt.Sprint(want) {
		t.Fatalf("slowed %v, want %v", rs.slow, want)
	}
	heal, err := n.(Resolver).Resolve(ctx, plan[1])
	if err != nil || heal.F != "heal e1/e2 e2/e1,e3 e3/e2" {
		t.Fatalf("heal %q %v", heal.F, err)
	}
	if err := n.Apply(ctx, heal); err != nil {
		t.Fatal(err)
	}
	if len(rs.slow) != 0 || n.Healing() != nil {
		t.Fatalf("after the heal %v still slowed", rs.slow)
	}
}
