package systems

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// startZKSys starts a 3-member ensemble, or skips when the machine has no ZooKeeper or java.
func startZKSys(t *testing.T) *zkSys {
	t.Helper()
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		t.Skip("zookeeper tests skipped: Debian's zookeeper is not installed (scripts/install-deps.sh installs it)")
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("zookeeper tests skipped: no java (scripts/install-deps.sh installs it)")
	}
	sys, err := Start(context.Background(), "zookeeper", Config{Dir: t.TempDir(), Groups: []string{"c1"},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	return sys.(*zkSys)
}

func zkLeaderOf(t *testing.T, s *zkSys, not string) string {
	t.Helper()
	var leader string
	eventually(t, 2*time.Minute, func() error { // a bound on a hang: a loaded machine elects slowly (issue 28)
		l := WithRole(s.Roles(), RoleLeader)
		if len(l) != 1 || l[0] == not || zkMode(s.nodes[nodeIndex(s.nodes, l[0])].Addr) != "leader" {
			return fmt.Errorf("leaders %v (not %q)", l, not)
		}
		leader = l[0]
		return nil
	})
	return leader
}

func nodeIndex(nodes []Node, name string) int {
	for i, n := range nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// The ensemble serves through the client links and reports its leader; a leader cut from its peers
// by the peer links alone loses the leadership (the links carry quorum and election, no path goes
// around them); killing the leader elects another; a member restarted without its data rejoins
// (myid kept); a paused member stops answering and answers again when continued.
func TestZooKeeperRolesPeerLinksRestart(t *testing.T) {
	s := startZKSys(t)
	ctx := context.Background()
	eps, err := s.Endpoints("c1")
	if err != nil || len(eps) != 3 {
		t.Fatalf("endpoints %v: %v", eps, err)
	}
	for _, e := range eps {
		if zkMode(e.Addr) == "" {
			t.Fatalf("member %s does not serve through its link %s", e.Node, e.Addr)
		}
	}
	leader := zkLeaderOf(t, s, "")
	cutMember(t, &etcdSys{links: s.links}, leader)
	next := zkLeaderOf(t, s, leader)
	for _, l := range s.links.All() {
		for _, tx := range []string{"cut-upstream", "cut-downstream"} {
			l.RemoveToxic(ctx, tx)
		}
	}

	b := s.Backend()
	if err := b.Kill(next); err != nil {
		t.Fatal(err)
	}
	zkLeaderOf(t, s, next)
	if err := b.StartEmpty(ctx, next); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error { return s.Ping(ctx, next) })

	follower := WithRole(s.Roles(), RoleFollower)[0]
	if err := b.Signal(follower, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The stop takes effect when the kernel next schedules the JVM's threads, a moment later on a
	// loaded machine: the member must stop answering soon, and stay silent until it continues.
	eventually(t, 5*time.Second, func() error {
		if s.Ping(ctx, follower) == nil {
			return fmt.Errorf("stopped member %s still answers", follower)
		}
		return nil
	})
	if err := b.Signal(follower, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, func() error { return s.Ping(ctx, follower) })
}
