package systems

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func startCluster(t *testing.T, nodes int, p Persistence) *Local {
	t.Helper()
	c, err := StartLocal(context.Background(), LocalConfig{Nodes: nodes, Dir: t.TempDir(), Persistence: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func client(t *testing.T, n *LocalNode) *redis.Client {
	t.Helper()
	rc := n.Admin()
	t.Cleanup(func() { rc.Close() })
	return rc
}

func TestKillAndRestartWithoutPersistenceComesBackEmpty(t *testing.T) {
	c := startCluster(t, 3, PersistNone)
	ctx := context.Background()
	n := c.Nodes()[1]
	rc := client(t, n)
	if err := rc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(n.Name); err != nil {
		t.Fatal(err)
	}
	if c.Running(n.Name) {
		t.Fatal("node still running after kill")
	}
	if err := rc.Ping(ctx).Err(); err == nil {
		t.Fatal("killed node still answers")
	}
	if err := c.Start(ctx, n.Name); err != nil {
		t.Fatal(err)
	}
	if err := rc.Get(ctx, "k").Err(); err != redis.Nil {
		t.Fatalf("restarted node kept its data: %v", err)
	}
}

func TestAOFAlwaysSurvivesKill(t *testing.T) {
	c := startCluster(t, 1, PersistAOFAlways)
	ctx := context.Background()
	n := c.Nodes()[0]
	rc := client(t, n)
	if err := rc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	c.Kill(n.Name)
	if err := c.Start(ctx, n.Name); err != nil {
		t.Fatal(err)
	}
	if v, err := rc.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("aof-always lost an acknowledged write: %q %v", v, err)
	}
}

func TestBasePortInUseIsAClearError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = StartLocal(context.Background(), LocalConfig{Nodes: 1, Dir: t.TempDir(), BasePort: port})
	if err == nil || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), "--base-port") {
		t.Fatalf("want an error naming the port in use and --base-port, got %v", err)
	}
}

func TestMissingRedisServerNamesTheInstall(t *testing.T) {
	_, err := StartLocal(context.Background(), LocalConfig{Nodes: 1, Dir: t.TempDir(), RedisServer: "/nonexistent/redis-server"})
	if err == nil || !strings.Contains(err.Error(), "apt-get install redis-server") {
		t.Fatalf("want the install command, got %v", err)
	}
}

// The no-orphan promise when the harness dies without any cleanup: a child test process starts a
// cluster, prints the node pids, and is SIGKILLed. Every node must die with it.
func TestNodesDieWithAKilledHarness(t *testing.T) {
	if os.Getenv("LOCKPICK_ORPHAN_CHILD") != "" {
		c, err := StartLocal(context.Background(), LocalConfig{Nodes: 3, Dir: os.Getenv("LOCKPICK_ORPHAN_CHILD")})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		for _, n := range c.Nodes() {
			fmt.Println("pid", c.Pid(n.Name))
		}
		fmt.Println("ready")
		time.Sleep(time.Minute)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestNodesDieWithAKilledHarness$")
	cmd.Env = append(os.Environ(), "LOCKPICK_ORPHAN_CHILD="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	buf := make([]byte, 4096)
	var text string
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(text, "ready") && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		text += string(buf[:n])
		if err != nil {
			break
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if p, ok := strings.CutPrefix(line, "pid "); ok {
			pid, _ := strconv.Atoi(p)
			pids = append(pids, pid)
		}
	}
	if len(pids) != 3 {
		cmd.Process.Kill()
		t.Fatalf("child did not start 3 nodes: %q", text)
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline = time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("node pid %d outlived its harness", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A relative directory, as the default --store gives, still starts every node: the paths a node
// sees are absolute.
func TestRelativeDirStartsNodes(t *testing.T) {
	t.Chdir(t.TempDir())
	c, err := StartLocal(context.Background(), LocalConfig{Nodes: 2, Dir: filepath.Join("store", "run", "nodes"), Persistence: PersistAOFAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range c.Nodes() {
		if !filepath.IsAbs(n.Dir) {
			t.Errorf("node %s has the relative directory %s", n.Name, n.Dir)
		}
		if err := client(t, n).Set(context.Background(), "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"redis.log", "appendonlydir"} {
			if _, err := os.Stat(filepath.Join("store", "run", "nodes", n.Name, f)); err != nil {
				t.Errorf("node %s: %v", n.Name, err)
			}
		}
	}
}

// A node that fails to start is reported with the lines it wrote itself, not a guess.
func TestFailedStartQuotesTheNodesOwnOutput(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "redis-server")
	script := "#!/bin/sh\necho 'starting'\necho '*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***' >&2\necho \"Can't chdir to 'somewhere': No such file or directory\" >&2\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := StartLocal(context.Background(), LocalConfig{Nodes: 1, Dir: t.TempDir(), RedisServer: bin})
	if err == nil {
		t.Fatal("a node that exits at once started")
	}
	msg := err.Error()
	for _, want := range []string{"Can't chdir to 'somewhere'", "FATAL CONFIG FILE ERROR", "stdout.log"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not quote %q", msg, want)
		}
	}
	if strings.Contains(msg, "in use") || strings.Contains(msg, "\n") {
		t.Errorf("error %q guesses at the port or is not one line", msg)
	}
}

// Node ports come from below the ephemeral range, where no outgoing connection takes them.
func TestReservePortIsBelowTheEphemeralRange(t *testing.T) {
	lo, hi := nodePortRange()
	for range 20 {
		l, err := ReservePort()
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p < lo || p > hi {
			t.Fatalf("port %d outside %d..%d", p, lo, hi)
		}
	}
	if e, err := ephemeralLow(); err == nil && hi >= e {
		t.Fatalf("range %d..%d reaches the ephemeral range from %d", lo, hi, e)
	}
}
