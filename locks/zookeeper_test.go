package locks

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/systems"
)

// zkServerJars are what Debian's zookeeper package needs to run a member.
var zkServerJars = []string{"zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-simple", "metrics-core", "snappy-java", "commons-cli", "commons-io", "netty-handler", "netty-transport", "netty-common", "netty-buffer", "netty-codec", "netty-resolver", "netty-transport-native-epoll", "netty-transport-native-unix-common"}

// zkEnsemble starts n ZooKeeper members from Debian's jars (QuorumPeerMain, one JVM each) on
// loopback, waits until a quorum serves, and stops them when the test ends. It skips the test
// when java or the jars are missing.
func zkEnsemble(t *testing.T, n int) []Endpoint {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java on PATH (apt-get install default-jdk-headless)")
	}
	var cp []string
	for _, j := range zkServerJars {
		p := "/usr/share/java/" + j + ".jar"
		if _, err := os.Stat(p); err != nil {
			t.Skipf("no %s (apt-get install zookeeper)", p)
		}
		cp = append(cp, p)
	}
	ls, err := systems.ReservePorts(3 * n)
	if err != nil {
		t.Fatal(err)
	}
	port := func(i int) int { return ls[i].Addr().(*net.TCPAddr).Port }
	var servers []string
	for i := range n {
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, port(3*i+1), port(3*i+2)))
	}
	var eps []Endpoint
	for i := range n {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("z%d", i+1))
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data", "myid"), fmt.Appendf(nil, "%d\n", i+1), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf("tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n%s\n",
			filepath.Join(dir, "data"), port(3*i), strings.Join(servers, "\n"))
		if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(dir, "member.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(java, "-Xmx128m", "-XX:+UseSerialGC", "-cp", strings.Join(cp, ":"),
			"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg"))
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		for j := 3 * i; j < 3*i+3; j++ {
			ls[j].Close()
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			logf.Close()
		})
		eps = append(eps, Endpoint{Node: fmt.Sprintf("z%d", i+1), Role: "member", Addr: fmt.Sprintf("127.0.0.1:%d", port(3*i))})
	}
	// Three JVMs starting on a loaded machine take a while; the bound only ends a hang (issue 28).
	deadline := time.Now().Add(2 * time.Minute)
	for _, ep := range eps {
		for !zkServes(ep.Addr) {
			if time.Now().After(deadline) {
				t.Fatalf("the ensemble did not serve within 2 minutes (member logs in %s)", t.TempDir())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return eps
}

// zkServes reports whether the member at addr is part of a serving quorum (the srvr command
// answers with its mode only then).
func zkServes(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	b := make([]byte, 4096)
	var out []byte
	for {
		k, err := c.Read(b)
		out = append(out, b[:k]...)
		if err != nil {
			break
		}
	}
	return strings.Contains(string(out), "Mode: ")
}

// The ZooKeeper clients pass the conformance the other shipped clients pass (TestShippedClients),
// against a real 3-member ensemble through their libraries, and hand out growing fencing tokens.
func TestShippedZooKeeperClients(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ZooKeeper ensemble")
	}
	eps := zkEnsemble(t, 3)
	for _, name := range []string{"go-zk", "curator", "kazoo"} {
		t.Run(name, func(t *testing.T) {
			k, _ := Lookup(name)
			dir := t.TempDir()
			// 6 s sessions, and waits of half that for a lock: at load 50 a first acquire (a JVM
			// loading its jars, a parent node made) outran 2 s sessions' 1 s wait (issue 28).
			// Nothing here waits for a session to end.
			const ttl = 6 * time.Second
			opts := func(p int) Options {
				return Options{Process: p, TTL: ttl, KeyPrefix: "lockpick:", ClientDir: dir, NodeTimeout: time.Second}
			}
			const key = "lockpick:0"
			a, err := Build(k, eps, opts(1))
			if err != nil {
				t.Skipf("%s cannot start here (make deps installs its packages): %v", name, err)
			}
			defer a.Close()
			b, err := Build(k, eps, opts(2))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			ctx := context.Background()
			la, err := a.Acquire(ctx, key, ttl)
			if err != nil || la.Value == "" || la.Token <= 0 {
				t.Fatalf("acquire: %+v, %v", la, err)
			}
			if k.Open != la.Deadline.IsZero() {
				t.Fatalf("deadline %v for a lock whose leases are open: %v", la.Deadline, k.Open)
			}
			// The probe the nemesis aims with sees the holder's lock node on every member.
			var nodes []Node
			for _, ep := range eps {
				nodes = append(nodes, Node{Name: ep.Node, Addr: ep.Addr, Data: true})
			}
			probe, err := k.Probe(nodes)
			if err != nil {
				t.Fatal(err)
			}
			defer probe.Close()
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if got := probe.Leases(pctx, []string{key}); len(got) != 1 || got[0].Value != la.Value || len(got[0].Nodes) != len(eps) {
				t.Fatalf("probe sees %+v, want %s on %d members", got, la.Value, len(eps))
			}
			// Refused after the library's own wait (half the TTL), definitely.
			if _, err := b.Acquire(ctx, key, ttl); !IsHeld(err) {
				t.Fatalf("acquire of a held key: %v, want held", err)
			}
			if err := a.Release(ctx, la); err != nil {
				t.Fatal(err)
			}
			if err := a.Release(ctx, la); err == nil || IsIndeterminate(err) {
				t.Fatalf("second release: %v, want a definite lost", err)
			}
			lb, err := b.Acquire(ctx, key, ttl)
			if err != nil || lb.Value == la.Value {
				t.Fatalf("acquire after the release: %+v, %v", lb, err)
			}
			if lb.Token <= la.Token {
				t.Fatalf("token %d after %d: fencing tokens must grow", lb.Token, la.Token)
			}
			if _, err := a.Acquire(ctx, key, ttl); !IsHeld(err) {
				t.Fatalf("acquire of a held key: %v, want held", err)
			}
		})
	}
}

// CURATOR-206's class, on the clients themselves: a holder stopped (SIGSTOP, as client-pause does)
// past its session timeout loses its lock node to session expiry; another client is granted the
// lock while the stopped holder has been told nothing, and the holder's connection listener says
// "lost" only after it runs again. The lock cannot stop a holder that is not running: the window
// between the other grant and that event is two holders, which a run reports as a violation.
func TestZooKeeperHolderPausedPastSession(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ZooKeeper ensemble")
	}
	eps := zkEnsemble(t, 3)
	for _, name := range []string{"curator", "kazoo"} {
		t.Run(name, func(t *testing.T) {
			k, _ := Lookup(name)
			dir := t.TempDir()
			// 6 s sessions, so that an acquire's wait (half of it) outlasts a loaded machine's
			// first acquire (issue 28); the holder is stopped past its session all the same.
			const ttl = 6 * time.Second
			opts := func(p int) Options {
				return Options{Process: p, TTL: ttl, KeyPrefix: "lockpick:", ClientDir: dir, NodeTimeout: time.Second}
			}
			const key = "lockpick:0"
			a, err := Build(k, eps, opts(1))
			if err != nil {
				t.Skipf("%s cannot start here (make deps installs its packages): %v", name, err)
			}
			defer a.Close()
			lost := make(chan time.Time, 4)
			a.(Notifier).Notify(func(e LeaseEvent) {
				if e.Lost {
					lost <- time.Now()
				}
			})
			b, err := Build(k, eps, opts(2))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			ctx := context.Background()
			// Nobody else asks for the key yet: a refusal is the library's wait (half the TTL)
			// running out on a loaded machine (kazoo's at load 27 with 4 s sessions), so ask again.
			// The minute only ends a hang.
			for deadline := time.Now().Add(time.Minute); ; {
				_, err := a.Acquire(ctx, key, ttl)
				if err == nil {
					break
				}
				if !IsHeld(err) || time.Now().After(deadline) {
					t.Fatal(err)
				}
			}
			pauser := a.(interface {
				Pause() error
				Resume() error
			})
			if err := pauser.Pause(); err != nil {
				t.Fatal(err)
			}
			resumed := false
			defer func() {
				if !resumed {
					pauser.Resume()
				}
			}()
			var granted time.Time
			// The bounds below only end a hang: the session ends 6 s after the stop.
			for deadline := time.Now().Add(time.Minute); granted.IsZero() && time.Now().Before(deadline); {
				if _, err := b.Acquire(ctx, key, ttl); err == nil {
					granted = time.Now()
				} else if !IsHeld(err) {
					t.Fatalf("acquire while the holder is stopped: %v", err)
				}
			}
			if granted.IsZero() {
				t.Fatal("nobody was granted the lock within a minute of stopping its holder (session timeout 6s)")
			}
			select {
			case at := <-lost:
				t.Fatalf("the stopped holder reported its loss at %v, before the other grant", at)
			default:
			}
			resumed = true
			if err := pauser.Resume(); err != nil {
				t.Fatal(err)
			}
			select {
			case at := <-lost:
				t.Logf("%s: another client was granted the lock %v before the stopped holder learned it had lost it", name, at.Sub(granted).Round(time.Millisecond))
			case <-time.After(time.Minute):
				t.Fatal("the holder never reported its lost session within a minute after it ran again")
			}
		})
	}
}
