package systems

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/links"
)

func startSentinelSys(t *testing.T, sc SentinelConfig) *sentinelSys {
	t.Helper()
	sys, err := Start(context.Background(), "redis-sentinel", Config{Dir: t.TempDir(), Groups: []string{"c1"}, Sentinel: sc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	return sys.(*sentinelSys)
}

func admin(t *testing.T, s *sentinelSys, node string) *redis.Client {
	t.Helper()
	for _, n := range s.nodes {
		if n.Name == node {
			rc := AdminClient(n.Addr)
			t.Cleanup(func() { rc.Close() })
			return rc
		}
	}
	t.Fatalf("no node %s", node)
	return nil
}

// eventually polls f every 20ms until it returns nil or wait passes.
func eventually(t *testing.T, wait time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", wait, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func getOn(rc *redis.Client, key string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return rc.Get(ctx, key).Result()
}

// The layout, the roles at start, and every path through a link: a write through the client link
// reaches both replicas, every replica replicates from the primary's known (router) address, and
// the router never saw a connection from a source it does not know.
func TestSentinelStartsWithRolesAndEveryPathLinked(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	s := startSentinelSys(t, SentinelConfig{})
	want := map[string]Role{"n1": RolePrimary, "n2": RoleReplica, "n3": RoleReplica, "s1": RoleSentinel, "s2": RoleSentinel, "s3": RoleSentinel}
	if got := s.Roles(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("roles %v, want %v", got, want)
	}
	eps, err := s.Endpoints("c1")
	if err != nil || len(eps) != 6 {
		t.Fatalf("endpoints %v %v", eps, err)
	}
	rc := redis.NewClient(&redis.Options{Addr: eps[0].Addr, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	defer rc.Close()
	if err := rc.Set(context.Background(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"n2", "n3"} {
		a := admin(t, s, r)
		eventually(t, 5*time.Second, func() error {
			if v, err := getOn(a, "k"); v != "v" {
				return fmt.Errorf("%s has not replicated k: %q %v", r, v, err)
			}
			return nil
		})
		info, _ := a.Info(context.Background(), "replication").Result()
		_, port, _ := net.SplitHostPort(s.Known("n1"))
		if !strings.Contains(info, "master_port:"+port+"\r") {
			t.Fatalf("%s replicates from somewhere else than n1's known address %s:\n%s", r, s.Known("n1"), info)
		}
	}
	if n := s.router.Refused(); n != 0 {
		t.Fatalf("the router refused %d connections from unknown sources", n)
	}
	// A few rounds of sentinel chatter later, every server-to-server path still went through a link.
	time.Sleep(2500 * time.Millisecond)
	if n := s.router.Refused(); n != 0 {
		t.Fatalf("the router refused %d connections from unknown sources", n)
	}
}

// A stalled replica->primary link stops replication for that replica alone: a key set on the
// primary reaches the other replica, not this one, until the stall is removed; then it arrives.
// Sentinel's +fix-slave-config cannot route around the stall, as the address it would write is the
// router's.
func TestCutReplicaLinkStopsReplicationUntilHealed(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	s := startSentinelSys(t, SentinelConfig{})
	ctx := context.Background()
	l, err := s.links.Get("n2", "n1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range links.Stall("stall") {
		if err := l.AddToxic(tx); err != nil {
			t.Fatal(err)
		}
	}
	primary, n2, n3 := admin(t, s, "n1"), admin(t, s, "n2"), admin(t, s, "n3")
	if err := primary.Set(ctx, "during", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		if v, _ := getOn(n3, "during"); v != "x" {
			return errors.New("n3, whose link is fine, did not replicate")
		}
		return nil
	})
	// Longer than the sentinels' down-after and their replica checks: nothing they do lets it through.
	time.Sleep(3 * time.Second)
	if v, err := getOn(n2, "during"); !errors.Is(err, redis.Nil) {
		t.Fatalf("n2 replicated through a stalled link: %q %v", v, err)
	}
	for _, tx := range links.Stall("stall") {
		if err := l.RemoveToxic(ctx, tx.Name); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() error {
		if v, _ := getOn(n2, "during"); v != "x" {
			return errors.New("n2 did not catch up after the heal")
		}
		return nil
	})
}

// A killed primary is failed over: the system's roles follow, announced as events, and they agree
// with what every sentinel answers to SENTINEL get-master-addr-by-name.
func TestFailoverRolesAgreeWithTheSentinels(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	s := startSentinelSys(t, SentinelConfig{})
	var mu sync.Mutex
	var events []Event
	s.Watch(func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	})
	if err := s.Backend().Kill("n1"); err != nil {
		t.Fatal(err)
	}
	var promoted string
	// The bounds only end a hang: on a loaded machine the sentinels' election can take a few
	// rounds (issue 28).
	eventually(t, 2*time.Minute, func() error {
		promoted = WithRole(s.Roles(), RolePrimary)[0]
		if promoted == "n1" {
			return errors.New("no failover yet")
		}
		return nil
	})
	if r := s.Roles()["n1"]; r != RoleReplica {
		t.Fatalf("the old primary is %q, want replica", r)
	}
	for _, n := range s.nodes {
		if n.Role != RoleSentinel {
			continue
		}
		sc := sentinelClient(n.Addr)
		defer sc.Close()
		eventually(t, time.Minute, func() error {
			addr, err := sc.GetMasterAddrByName(context.Background(), MasterName).Result()
			if err != nil {
				return err
			}
			if got := s.nodeAt(addr[0], addr[1]); got != promoted {
				return fmt.Errorf("%s says the master is %s, the system says %s", n.Name, got, promoted)
			}
			return nil
		})
	}
	mu.Lock()
	defer mu.Unlock()
	var switched, changed bool
	for _, e := range events {
		if e.Kind == "+switch-master" && strings.Contains(e.Text, "n1 "+promoted) {
			switched = true
		}
		if e.Kind == KindRoles && e.Roles[promoted] == RolePrimary && e.Roles["n1"] == RoleReplica {
			changed = true
		}
	}
	if !switched || !changed {
		t.Fatalf("events lack the switch (%v) or the role change (%v): %+v", switched, changed, events)
	}
	// The old primary comes back empty and is made a replica of the new one.
	if err := s.Backend().Start(context.Background(), "n1"); err != nil {
		t.Fatal(err)
	}
	a := admin(t, s, "n1")
	eventually(t, 15*time.Second, func() error {
		info, err := a.Info(context.Background(), "replication").Result()
		if err != nil || !strings.Contains(info, "role:slave") {
			return fmt.Errorf("n1 not yet a replica: %v", err)
		}
		return nil
	})
}

// The no-orphan promise covers every process of the system: a child test process starts it,
// prints the pids of the primary, replicas and sentinels, and is SIGKILLed; every one must die.
func TestSentinelNodesDieWithAKilledHarness(t *testing.T) {
	nodesDieWithAKilledHarness(t, "TestSentinelNodesDieWithAKilledHarness", "redis-sentinel", 6,
		func(dir string) Config { return Config{Dir: dir, Groups: []string{"c1"}} },
		func(sys System, node string) int { return sys.(*sentinelSys).backend.(*table).Pid(node) })
}

// nodesDieWithAKilledHarness runs test again as a child process that starts system with cfg, prints
// the pid of each of its want nodes, and is SIGKILLed; every node must die within seconds.
func nodesDieWithAKilledHarness(t *testing.T, test, system string, want int, cfg func(dir string) Config, pid func(System, string) int) {
	t.Helper()
	const env = "LOCKPICK_ORPHAN_DIR"
	if dir := os.Getenv(env); dir != "" {
		sys, err := Start(context.Background(), system, cfg(dir))
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		for _, n := range sys.Nodes() {
			fmt.Println("pid", pid(sys, n.Name))
		}
		fmt.Println("ready")
		time.Sleep(time.Minute)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^"+test+"$")
	cmd.Env = append(os.Environ(), env+"="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var text string
	buf := make([]byte, 4096)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(text, "ready") && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		text += string(buf[:n])
		if err != nil {
			break
		}
	}
	var pids []int
	for _, line := range strings.Split(text, "\n") {
		if p, ok := strings.CutPrefix(line, "pid "); ok {
			pid, _ := strconv.Atoi(p)
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Errorf("node pid %d of %s was not running when its harness was killed: the check would prove nothing", pid, system)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if len(pids) != want || slices.Contains(pids, 0) || t.Failed() {
		t.Fatalf("child did not start %d nodes of %s: %q", want, system, text)
	}
	deadline = time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("node pid %d of %s outlived its harness", pid, system)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// alive reports whether pid is a live, non-zombie process.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}
