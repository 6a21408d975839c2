package systems

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/containers"
)

// remoteEngine is the local Engine reached over TCP on loopback: to the code, a remote Engine.
func remoteEngine(t *testing.T) *containers.Engine {
	t.Helper()
	ctx := context.Background()
	local, err := containers.Connect(ctx, "")
	if err != nil {
		t.Skipf("skipping the remote docker backend's test: %v", err)
	}
	local.Close()
	fw, err := containers.Forward("/var/run/docker.sock", "127.0.0.1:0")
	if err != nil {
		t.Skipf("skipping the remote docker backend's test: %v", err)
	}
	t.Cleanup(func() { fw.Close() })
	eng, err := containers.Connect(ctx, fw.Host())
	if err != nil {
		t.Skipf("skipping the remote docker backend's test: %v", err)
	}
	t.Cleanup(func() { eng.Close() })
	if eng.Local() {
		t.Fatalf("an Engine at %s is taken for a local one", eng.Host())
	}
	return eng
}

// Every Backend operation on redis-masters on a remote Engine, through its API only: nodes at
// published ports, restart keeping and losing data, pause, a kill while paused, the clock shim
// moved in place in every state of the node, cuts from the holder, and nothing left after Close.
func TestDockerRemoteMasters(t *testing.T) {
	ctx := context.Background()
	eng := remoteEngine(t)
	shim, err := FindClockShim(ctx, "", "")
	if err != nil {
		t.Skipf("skipping the remote docker backend's test: %v", err)
	}
	dir := t.TempDir()
	sys, err := Start(ctx, "redis-masters", Config{
		Dir: dir, Groups: []string{"c1"}, Nodes: 2, Persistence: PersistAOFAlways, ClockShim: shim,
		Backend: BackendDocker, Docker: DockerConfig{Engine: eng, Run: dir},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	b := sys.Backend()
	if _, ok := b.(*dockerRemote); !ok {
		t.Fatalf("a remote Engine got the backend %T", b)
	}
	n1 := sys.Nodes()[0]
	if host, port, _ := net.SplitHostPort(n1.Addr); host != "127.0.0.1" || port == "6379" {
		t.Fatalf("node %s at %s: want the port its pod publishes on the Engine host 127.0.0.1", n1.Name, n1.Addr)
	}
	admin := AdminClient(n1.Addr)
	defer admin.Close()
	if err := admin.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	testRemoteRestart(t, sys, admin)

	// Pause, then a kill of the paused node: its container goes, and the next start brings it back
	// at the same published address, with its data.
	if err := b.Signal(n1.Name, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := sys.Ping(ctx, n1.Name); err == nil {
		t.Fatal("a paused node answered PING")
	}
	// The clock moves while the node is paused; it reads the offset when it thaws.
	if err := b.SetClockOffset(n1.Name, -time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := b.Signal(n1.Name, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	wantClock(t, b, n1.Name, -time.Hour)
	if err := b.Signal(n1.Name, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := b.Kill(n1.Name); err != nil {
		t.Fatal(err)
	}
	if err := sys.Ping(ctx, n1.Name); err == nil {
		t.Fatal("a node killed while paused answered PING")
	}
	if err := b.SetClockOffset(n1.Name, 2*time.Hour); err != nil {
		t.Fatalf("set the clock of a node that is down: %v", err)
	}
	if err := b.Start(ctx, n1.Name); err != nil {
		t.Fatal(err)
	}
	if got := admin.Exists(ctx, "k").Val(); got != 1 {
		t.Fatalf("after a kill while paused and a start, EXISTS k = %d, want 1 (the append-only file)", got)
	}
	wantClock(t, b, n1.Name, 2*time.Hour)

	// A running node's clock moves in place, at its next read.
	n2 := sys.Nodes()[1].Name
	began := time.Now()
	if err := b.SetClockOffset(n2, time.Hour); err != nil {
		t.Fatal(err)
	}
	t.Logf("clock move %v", time.Since(began))
	wantClock(t, b, n2, time.Hour)

	testNetCut(t, sys, n2)

	if err := sys.Close(); err != nil {
		t.Fatal(err)
	}
	// The nodes' logs came home into the run's store.
	if log, err := os.ReadFile(filepath.Join(dir, "n1", "redis.log")); err != nil || !strings.Contains(string(log), readyLine) {
		t.Errorf("the log of n1 was not copied into the run's store: %v", err)
	}
	left, err := eng.Leftovers(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !left.Empty() {
		t.Fatalf("Close left %s on the Engine", left)
	}
}

// testRemoteRestart kills and starts the first node: the kept append-only file brings the key
// back; a start without data does not. The key is set again at the end.
func testRemoteRestart(t *testing.T, sys System, admin *redis.Client) {
	ctx := context.Background()
	b := sys.Backend()
	n1 := sys.Nodes()[0].Name
	for _, c := range []struct {
		start func(context.Context, string) error
		want  int64
	}{{b.Start, 1}, {b.StartEmpty, 0}} {
		began := time.Now()
		if err := b.Kill(n1); err != nil {
			t.Fatal(err)
		}
		killed := time.Since(began)
		if b.Running(n1) || sys.Ping(ctx, n1) == nil {
			t.Fatal("a killed node still answers")
		}
		began = time.Now()
		if err := c.start(ctx, n1); err != nil {
			t.Fatal(err)
		}
		t.Logf("kill %v, start %v", killed, time.Since(began))
		if got := admin.Exists(ctx, "k").Val(); got != c.want {
			t.Fatalf("after restart, EXISTS k = %d, want %d", got, c.want)
		}
	}
	if err := admin.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

func wantClock(t *testing.T, b Backend, node string, want time.Duration) {
	t.Helper()
	off, err := b.ClockOffset(node)
	if err != nil {
		t.Fatal(err)
	}
	if off < want-time.Second || off > want+time.Second {
		t.Fatalf("clock offset of %s is %v, want about %v", node, off, want)
	}
}

// Clients of a truly remote Engine reach a node through the Engine host's NAT and arrive from
// their own address, outside the run's network, where the loopback test's arrive from the bridge's
// gateway (the Engine's userland proxy): a cut stops them too. This host's own outward address
// plays the remote client; the nodes are published on every address for the test's few seconds.
func TestDockerRemoteCutFromOutside(t *testing.T) {
	ctx := context.Background()
	eng := remoteEngine(t)
	probe, err := net.Dial("udp", "192.0.2.1:9") // no packet is sent: it picks the outward address
	if err != nil {
		t.Skipf("skipping: this host has no outward address to play a remote client from: %v", err)
	}
	outward := probe.LocalAddr().(*net.UDPAddr).IP.String()
	probe.Close()
	dir := t.TempDir()
	sys, err := Start(ctx, "redis-masters", Config{
		Dir: dir, Groups: []string{"c1"}, Nodes: 1,
		Backend: BackendDocker, Docker: DockerConfig{Engine: eng, Run: dir, PublishHost: outward},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	n1 := sys.Nodes()[0]
	admin := AdminClient(n1.Addr)
	defer admin.Close()
	me, err := admin.ClientInfo(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(me.Addr); strings.HasPrefix(host, "10.213.") {
		t.Fatalf("the node sees this client at %s, inside the run's network: the test would prove nothing", me.Addr)
	}
	testNetCut(t, sys, n1.Name)
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/a/b": `'/a/b'`, "/my store/n1": `'/my store/n1'`, "it's": `'it'\''s'`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCheckRemote(t *testing.T) {
	for _, name := range Names() {
		top, _ := Lookup(name)
		_, refused := top.Traits().NotOn[BackendDocker]
		if err := CheckRemote(name); (err != nil) != refused || refused && !strings.Contains(err.Error(), "drop --docker-host") {
			t.Errorf("CheckRemote(%s): %v, want refused %v (and then a refusal that says what to do)", name, err, refused)
		}
	}
	err := CheckRemote("cassandra")
	if err == nil || !strings.Contains(err.Error(), "drop --docker-host") {
		t.Fatalf("CheckRemote(cassandra) = %v, want a refusal that says what to do", err)
	}
}

// TestDockerSlowPeer on a remote Engine: the reader runs in the caller's holder, lockpick's own
// binary (here the test binary, which TestMain makes the same reader) packed into the node image.
// The replica n2's path to its primary n1 takes the delay on a round trip, while the reverse path,
// another replica's path to n1 and the harness's own connection to n1 do not; healed, the delay is
// gone, and neither a rule nor a bound queue is left in n2's namespace. A reader whose lockpick is
// gone ends by itself, and one killed with its rules in place lets the path through undelayed
// (--queue-bypass), and its heal says so; jitter stays within its bounds; Close stops a slowdown left in place, and leaves nothing on the Engine.
func TestDockerRemoteSlowPeer(t *testing.T) {
	eng := remoteEngine(t)
	dir := t.TempDir()
	sys, err := Start(context.Background(), "redis-sentinel", Config{
		Dir: dir, Groups: []string{"c1"}, Sentinel: SentinelConfig{Replicas: 2, Sentinels: 1},
		Backend: BackendDocker, Docker: DockerConfig{Engine: eng, Run: dir},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	b := sys.(*sentinelSys).backend.(*dockerRemote)
	ps, ok := sys.Backend().(PeerSlower)
	if !ok {
		t.Fatal("a remote Engine's docker backend cannot slow the paths between servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Servers call each other at their holders' addresses; the harness at the published ports.
	addr := map[string]string{"host": b.published("n1")}
	for _, name := range []string{"n1", "n2", "n3"} {
		n, err := b.node(name)
		if err != nil {
			t.Fatal(err)
		}
		addr[name] = net.JoinHostPort(n.peer.ip, strconv.Itoa(n.peer.port))
	}
	rtt := func(from, to string) time.Duration { return medianPing(t, b, from, addr[to]) }

	// A shell kept open in a holder runs its next script after idling past the last one's deadline
	// (the read deadline is not left on the attached connection, whose output is read on between
	// scripts: before, the next script read back a timeout, and under load a fault failed so).
	n3, _ := b.node("n3")
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	if _, err := b.sh(short, n3, inHolder, "true"); err != nil {
		t.Fatal(err)
	}
	cancelShort()
	time.Sleep(1500 * time.Millisecond)
	if _, err := b.sh(ctx, n3, inHolder, "true"); err != nil {
		t.Fatalf("a shell idle past its last script's deadline: %v", err)
	}

	slowOnePath(t, ctx, ps, b, addr, rtt, "host")
	const delay = 200 * time.Millisecond

	// lockpick dies (its connection to the reader closes): the reader ends by itself, the rules
	// stay, and the path goes on undelayed.
	n2, _ := b.node("n2")
	n2.op.Lock()
	r := n2.peer.slows["n1"].remote
	n2.op.Unlock()
	r.out.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := b.sh(ctx, n2, inHolder, "kill -0 "+strconv.Itoa(r.pid)+" 2>/dev/null"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reader still runs 5s after its connection closed")
		}
	}
	if got := rtt("n2", "n1"); got > 100*time.Millisecond {
		t.Fatalf("n2->n1 with its reader gone takes %v a round trip: packets wait for nobody", got)
	}
	if _, err := ps.UnslowPeer(ctx, "n2", "n1"); err == nil {
		t.Fatal("unslow after the reader's connection closed: no error, want its counts said missing")
	}
	nothingQueued(t, b, "n2")

	// The reader is killed: the rules stay, and the path goes on undelayed.
	if err := ps.SlowPeer(ctx, "n2", "n1", delay, 0); err != nil {
		t.Fatal(err)
	}
	n2.op.Lock()
	pid := n2.peer.slows["n1"].remote.pid
	n2.op.Unlock()
	if _, err := b.sh(ctx, n2, inHolder, "kill -9 "+strconv.Itoa(pid)); err != nil {
		t.Fatal(err)
	}
	if got := rtt("n2", "n1"); got > 100*time.Millisecond {
		t.Fatalf("n2->n1 with its reader gone takes %v a round trip: packets wait for nobody", got)
	}
	if _, err := ps.UnslowPeer(ctx, "n2", "n1"); err == nil || !strings.Contains(err.Error(), "ended before it was stopped") {
		t.Fatalf("unslow after the reader was killed: %v, want it said", err)
	}
	nothingQueued(t, b, "n2")

	// A slowdown left in place is stopped by Close, which leaves nothing on the Engine.
	if err := ps.SlowPeer(ctx, "n3", "n1", delay, 0); err != nil {
		t.Fatal(err)
	}
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
