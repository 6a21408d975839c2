package systems

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockpick-dev/lockpick/links"
)

// startEtcdSys starts three members of the etcd on PATH (Debian's etcd-server, which make deps
// installs); a machine without it skips with the line that installs it.
func startEtcdSys(t *testing.T) *etcdSys {
	t.Helper()
	srv, err := FindEtcd(context.Background(), EtcdSystem, nil)
	if err != nil {
		t.Skipf("etcd tests skipped: %v", err)
	}
	return startEtcdWith(t, srv)
}

func startEtcdWith(t *testing.T, srv EtcdServer) *etcdSys {
	t.Helper()
	sys, err := Start(context.Background(), "etcd", Config{Dir: t.TempDir(), Groups: []string{"c1"}, Etcd: EtcdConfig{Server: srv.Path},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	return sys.(*etcdSys)
}

func leaderOf(t *testing.T, s *etcdSys) string {
	t.Helper()
	var leader string
	eventually(t, 10*time.Second, func() error {
		l := WithRole(s.Roles(), RoleLeader)
		if len(l) != 1 {
			return fmt.Errorf("leaders %v", l)
		}
		leader = l[0]
		return nil
	})
	return leader
}

// cutMember cuts every peer link to and from member, both directions of each.
func cutMember(t *testing.T, s *etcdSys, member string) {
	t.Helper()
	for _, l := range s.links.All() {
		if (l.Group == member || l.Node == member) && l.Group != "c1" {
			for _, tx := range []string{"upstream", "downstream"} {
				if err := l.AddToxic(links.Toxic{Name: "cut-" + tx, Type: "timeout", Stream: tx, Attributes: map[string]any{"timeout": 0}}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// Three members agree on a leader, a write through a client link is read on every member, every
// member's peer traffic goes through its forwarder, and a member cut from its peers by the peer
// links alone loses the leadership: the links carry the raft traffic, not a path around them.
func TestEtcdRolesAndPeerLinks(t *testing.T) {
	s := startEtcdSys(t)
	leader := leaderOf(t, s)
	eps, err := s.Endpoints("c1")
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, e := range eps {
		addrs = append(addrs, e.Addr)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: addrs, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	for _, n := range s.nodes {
		eventually(t, 5*time.Second, func() error {
			r, err := s.admins[n.Name].Get(ctx, "k", clientv3.WithSerializable())
			if err != nil || len(r.Kvs) != 1 {
				return fmt.Errorf("member %s: %v %v", n.Name, r, err)
			}
			return nil
		})
	}

	cutMember(t, s, leader)
	eventually(t, 15*time.Second, func() error {
		l := WithRole(s.Roles(), RoleLeader)
		if len(l) != 1 || l[0] == leader {
			return fmt.Errorf("leaders %v, the cut %s still among them", l, leader)
		}
		return nil
	})
}

// Killing the leader elects another; the killed member starts again with its data and rejoins; a
// member started without its data rejoins too (it bootstraps with the same id and catches up); a
// paused member is left behind by its peers and continues.
func TestEtcdKillRestartWipePause(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	s := startEtcdSys(t)
	b := s.Backend()
	leader := leaderOf(t, s)
	if err := b.Kill(leader); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, func() error {
		if l := WithRole(s.Roles(), RoleLeader); len(l) != 1 || l[0] == leader {
			return fmt.Errorf("leaders %v after killing %s", l, leader)
		}
		return nil
	})
	ctx := context.Background()
	if err := b.Start(ctx, leader); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, func() error { return s.Ping(ctx, leader) })

	follower := WithRole(s.Roles(), RoleFollower)[0]
	if err := b.Kill(follower); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(s.dir(follower) + "/etcd.log")
			lines := strings.Split(string(b), "\n")
			t.Logf("%s", strings.Join(lines[max(0, len(lines)-25):], "\n"))
		}
	})
	if err := b.StartEmpty(ctx, follower); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() error {
		st, err := s.status(ctx, follower)
		if err != nil {
			return err
		}
		if st.Leader == 0 {
			return fmt.Errorf("wiped member %s sees no leader", follower)
		}
		return nil
	})

	if err := b.Signal(follower, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx, follower); err == nil {
		t.Fatal("a stopped member answered")
	}
	if err := b.Signal(follower, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error { return s.Ping(ctx, follower) })
	if err := b.SetClockOffset(follower, time.Second); err == nil || !strings.Contains(err.Error(), "clock shim") {
		t.Fatalf("moving an etcd member's clock: %v, want a refusal naming the clock shim", err)
	}
}

// No etcd member outlives a harness that is SIGKILLed.
func TestEtcdMembersDieWithAKilledHarness(t *testing.T) {
	srv, err := FindEtcd(context.Background(), EtcdSystem, nil)
	if err != nil {
		t.Skipf("etcd tests skipped: %v", err)
	}
	nodesDieWithAKilledHarness(t, "TestEtcdMembersDieWithAKilledHarness", "etcd", 3,
		func(dir string) Config {
			return Config{Dir: dir, Groups: []string{"c1"}, Etcd: EtcdConfig{Server: srv.Path}}
		},
		func(sys System, node string) int { return sys.(*etcdSys).backend.(*table).Pid(node) })
}

// dir is a member's directory.
func (s *etcdSys) dir(node string) string {
	n, err := s.backend.(*table).node(node)
	if err != nil {
		return ""
	}
	return n.spec.dir
}
