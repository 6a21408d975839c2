package systems

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockpick-dev/lockpick/containers"
)

// dockerEngine connects to the Engine, or skips the test saying why.
func dockerEngine(t *testing.T) *containers.Engine {
	t.Helper()
	eng, err := containers.Connect(context.Background(), "")
	if err != nil {
		t.Skipf("skipping the docker backend's test: %v", err)
	}
	if err := NetToolsMissing(); err != nil {
		eng.Close()
		t.Skipf("skipping the docker backend's test: %v", err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// startDockerSystem starts name on the docker backend and returns it with a check that Close leaves
// nothing on the Engine.
func startDockerSystem(t *testing.T, eng *containers.Engine, name string, cfg Config) (System, func()) {
	t.Helper()
	dir := t.TempDir()
	cfg.Dir, cfg.Groups, cfg.Backend = dir, []string{"c1"}, BackendDocker
	cfg.Docker = DockerConfig{Engine: eng, Run: dir}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sys, err := Start(context.Background(), name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	var b nodeBackend
	switch s := sys.(type) {
	case *sentinelSys:
		b = s.backend
	case *etcdSys:
		b = s.backend
	}
	if _, remote := b.(*dockerRemote); remote == eng.Local() {
		t.Fatalf("the Engine at %s got the backend %T", eng.Host(), b)
	}
	return sys, func() {
		t.Helper()
		if err := sys.Close(); err != nil {
			t.Fatal(err)
		}
		left, err := eng.Leftovers(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if !left.Empty() {
			t.Fatalf("Close left %s on the Engine", left)
		}
	}
}

func peerCutter(t *testing.T, sys System) PeerCutter {
	t.Helper()
	pc, ok := sys.Backend().(PeerCutter)
	if !ok {
		t.Fatalf("the docker backend of %s cannot cut the paths between servers", sys.Name())
	}
	return pc
}

// redis-sentinel in containers: roles, the servers known by their containers' addresses (what the
// sentinels announce is what the client endpoints are Known by), a cut of one replica's path to the
// primary stopping its replication alone until healed, a failover after the primary's kill that the
// system's roles follow, and nothing left after Close.
func TestDockerSentinel(t *testing.T) { testDockerSentinel(t, dockerEngine(t)) }

// The same on a remote Engine (the local one reached over TCP): the servers known by their pods'
// addresses on the run's network, the harness reaching them at their published ports, the path
// cut from the caller's holder.
func TestDockerRemoteSentinel(t *testing.T) { testDockerSentinel(t, remotePeersEngine(t)) }

// remotePeersEngine is remoteEngine for the tests that cut paths between servers.
func remotePeersEngine(t *testing.T) *containers.Engine {
	t.Helper()
	if err := RemoteNetToolsMissing(); err != nil {
		t.Skipf("skipping the remote docker backend's test: %v", err)
	}
	return remoteEngine(t)
}

func testDockerSentinel(t *testing.T, eng *containers.Engine) {
	sys, closed := startDockerSystem(t, eng, "redis-sentinel", Config{})
	s := sys.(*sentinelSys)
	ctx := context.Background()
	want := map[string]Role{"n1": RolePrimary, "n2": RoleReplica, "n3": RoleReplica, "s1": RoleSentinel, "s2": RoleSentinel, "s3": RoleSentinel}
	if got := s.Roles(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("roles %v, want %v", got, want)
	}
	eps, err := s.Endpoints("c1")
	if err != nil {
		t.Fatal(err)
	}
	sc := sentinelClient(s.nodes[3].Addr)
	defer sc.Close()
	addr, err := sc.GetMasterAddrByName(ctx, MasterName).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := net.JoinHostPort(addr[0], addr[1]); got != eps[0].Known || strings.HasPrefix(got, "127.") {
		t.Fatalf("the sentinels name the master %s, the primary's endpoint is known as %s", got, eps[0].Known)
	}
	if !eng.Local() && s.nodes[0].Addr == eps[0].Known {
		t.Fatalf("on a remote Engine the harness reaches the primary at %s, the address the servers know it by", s.nodes[0].Addr)
	}

	// The path n2->n1 cut: n3 replicates a write, n2 does not until the heal.
	pc := peerCutter(t, sys)
	if err := pc.CutPeer(ctx, "n2", "n1", "drop"); err != nil {
		t.Fatal(err)
	}
	primary, n2, n3 := admin(t, s, "n1"), admin(t, s, "n2"), admin(t, s, "n3")
	if err := primary.Set(ctx, "during", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		if v, _ := getOn(n3, "during"); v != "x" {
			return errors.New("n3, whose path is fine, did not replicate")
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if v, err := getOn(n2, "during"); !errors.Is(err, redis.Nil) {
		t.Fatalf("n2 replicated through a cut path: %q %v", v, err)
	}
	if err := pc.HealPeer(ctx, "n2", "n1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, func() error {
		if v, _ := getOn(n2, "during"); v != "x" {
			return errors.New("n2 did not catch up after the heal")
		}
		return nil
	})

	// The primary killed: the sentinels promote a replica, and the system's roles follow.
	if err := s.Backend().Kill("n1"); err != nil {
		t.Fatal(err)
	}
	var promoted string
	eventually(t, 20*time.Second, func() error {
		promoted = WithRole(s.Roles(), RolePrimary)[0]
		if promoted == "n1" {
			return errors.New("no failover yet")
		}
		return nil
	})
	eventually(t, 10*time.Second, func() error {
		addr, err := sc.GetMasterAddrByName(ctx, MasterName).Result()
		if err != nil {
			return err
		}
		if got := s.nodeAt(addr[0], addr[1]); got != promoted {
			return fmt.Errorf("s1 says the master is %s, the system says %s", got, promoted)
		}
		return nil
	})
	if err := s.Backend().Start(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	a := admin(t, s, "n1")
	eventually(t, 15*time.Second, func() error {
		info, err := a.Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "role:slave") {
			return fmt.Errorf("n1 not yet a replica: %v", err)
		}
		return nil
	})
	closed()
}

// etcd in containers: a leader, a write through a client link read on every member, a leader cut
// from its peers (both ways, on the interfaces) loses the leadership, a healed member rejoins, a
// killed leader is replaced and restarts with and without its data, a paused member continues, and
// nothing is left after Close.
func TestDockerEtcd(t *testing.T) { testDockerEtcd(t, dockerEngine(t)) }

// The same on a remote Engine: members call each other at their pods' addresses, clients and the
// harness reach them at their published ports, cuts and kills go through the kept shells.
func TestDockerRemoteEtcd(t *testing.T) { testDockerEtcd(t, remotePeersEngine(t)) }

func testDockerEtcd(t *testing.T, eng *containers.Engine) {
	srv, err := FindEtcd(context.Background(), EtcdSystem, nil)
	if err != nil {
		t.Skipf("etcd tests skipped: %v", err)
	}
	sys, closed := startDockerSystem(t, eng, "etcd", Config{Etcd: EtcdConfig{Server: srv.Path}})
	s := sys.(*etcdSys)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
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

	// The leader cut from its peers, both ways: another leads; healed, it follows.
	pc := peerCutter(t, sys)
	for _, n := range s.nodes {
		if n.Name != leader {
			for _, c := range [][2]string{{leader, n.Name}, {n.Name, leader}} {
				if err := pc.CutPeer(ctx, c[0], c[1], "drop"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	eventually(t, 15*time.Second, func() error {
		if l := WithRole(s.Roles(), RoleLeader); len(l) != 1 || l[0] == leader {
			return fmt.Errorf("leaders %v, the cut %s still among them", l, leader)
		}
		return nil
	})
	for _, n := range s.nodes {
		for _, m := range s.nodes {
			if err := pc.HealPeer(ctx, n.Name, m.Name); n.Name != m.Name && err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.waitHealthy(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}

	// The leader killed: another is elected; the old one restarts with its data, then without.
	b := s.Backend()
	leader = leaderOf(t, s)
	if err := b.Kill(leader); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, func() error {
		if l := WithRole(s.Roles(), RoleLeader); len(l) != 1 || l[0] == leader {
			return fmt.Errorf("leaders %v after killing %s", l, leader)
		}
		return nil
	})
	if err := b.Start(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if err := s.waitHealthy(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if err := b.StartEmpty(ctx, leader); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() error {
		r, err := s.admins[leader].Get(ctx, "k", clientv3.WithSerializable())
		if err != nil || len(r.Kvs) != 1 {
			return fmt.Errorf("member %s restarted without data has not caught up: %v %v", leader, r, err)
		}
		return nil
	})

	// A paused member answers nobody, and continues.
	follower := WithRole(s.Roles(), RoleFollower)[0]
	if err := b.Signal(follower, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx, follower); err == nil {
		t.Fatal("a paused member answered")
	}
	if err := b.Signal(follower, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error { return s.Ping(ctx, follower) })

	// A member cut from the harness (netcut) restarts: its start takes its log's word, as it cannot
	// be asked, and it answers once healed.
	nc := sys.Backend().(netCutter)
	if err := nc.CutNetwork(ctx, follower, "drop"); err != nil {
		t.Fatal(err)
	}
	if err := b.Kill(follower); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, follower); err != nil {
		t.Fatalf("start of a cut member: %v", err)
	}
	if err := nc.HealNetwork(ctx, follower); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error { return s.Ping(ctx, follower) })
	closed()
}

// A node's clock in a sentinel deployment moves inside its container.
func TestDockerSentinelClock(t *testing.T) { testDockerSentinelClock(t, dockerEngine(t)) }

// The same on a remote Engine: the offset is stored from the holder's kept shell.
func TestDockerRemoteSentinelClock(t *testing.T) { testDockerSentinelClock(t, remoteEngine(t)) }

func testDockerSentinelClock(t *testing.T, eng *containers.Engine) {
	shim, err := FindClockShim(context.Background(), "", "")
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	sys, closed := startDockerSystem(t, eng, "redis-sentinel", Config{ClockShim: shim, Sentinel: SentinelConfig{Replicas: 1, Sentinels: 1}})
	b := sys.Backend()
	if err := b.SetClockOffset("n1", time.Hour); err != nil {
		t.Fatal(err)
	}
	off, err := b.ClockOffset("n1")
	if err != nil {
		t.Fatal(err)
	}
	if off < time.Hour-time.Second || off > time.Hour+time.Second {
		t.Fatalf("clock offset of n1 is %v, want about 1h", off)
	}
	closed()
}
