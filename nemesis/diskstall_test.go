package nemesis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/systems"
)

// A disk stall holds a redis-server's fsyncs (appendfsync always: each write waits for its AOF
// fsync in the main loop): a SET sent during the stall is not answered until the heal, then it is;
// the server's process never stopped, every thread was traced during the stall and none after, and
// nothing is left to heal.
func TestDiskStallHoldsFsyncsUntilTheHeal(t *testing.T) {
	c, err := systems.StartLocal(context.Background(), systems.LocalConfig{Nodes: 1, Dir: t.TempDir(), Persistence: systems.PersistAOFAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	node := c.Nodes()[0]
	env := netEnv([]string{node.Name}, []string{"c1"})
	env.Cluster = c
	n := build(t, "disk-stall:duration=2s", env).(*DiskStall)
	client := node.Admin()
	defer client.Close()
	ctx := context.Background()
	if err := client.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.Apply(ctx, Op{F: FStall, Nodes: []string{node.Name}, Effect: history.EffectFault}); err != nil {
		t.Fatal(err)
	}
	pid := c.Pid(node.Name)
	if traced, err := tracedBy(pid, []int{pid}, n.tracers[node.Name].Process.Pid); !traced {
		t.Fatalf("after the stall not every thread of %d is traced by strace: %v", pid, err)
	}
	answered := make(chan time.Time, 1)
	go func() {
		client.Set(ctx, "k", "during", 0)
		answered <- time.Now()
	}()
	select {
	case at := <-answered:
		t.Fatalf("a SET was answered at %v during the stall", at)
	case <-time.After(time.Second):
	}
	if heal := n.Healing(); len(heal) != 1 || heal[0].F != FUnstall || strings.Join(heal[0].Nodes, ",") != node.Name {
		t.Fatalf("healing %+v", heal)
	}
	healed := time.Now()
	if err := n.Apply(ctx, Op{F: FUnstall, Nodes: []string{node.Name}, Effect: history.EffectHeal}); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-answered:
		if at.Before(healed) {
			t.Fatalf("the SET was answered before the heal")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the SET was not answered within 10s of the heal")
	}
	if v, err := client.Get(ctx, "k").Result(); err != nil || v != "during" {
		t.Fatalf("after the heal k = %q, %v", v, err)
	}
	if tr, err := tracerOf(fmt.Sprintf("/proc/%d/status", pid)); err != nil || tr != 0 {
		t.Fatalf("after the heal the server's tracer is %d (%v)", tr, err)
	}
	if n.Healing() != nil {
		t.Fatalf("left to heal: %+v", n.Healing())
	}
}

// Only the local backend's servers are processes strace can reach: elsewhere disk-stall is refused
// in one line that names the fault and the backend.
func TestDiskStallNeedsLocalProcesses(t *testing.T) {
	faults, err := ParseFaults("disk-stall:target=leader")
	if err != nil {
		t.Fatal(err)
	}
	if err := Offered("etcd", "local", "", "").Check(faults); err != nil {
		t.Errorf("on --backend local: %v", err)
	}
	for _, backend := range []string{"docker", "ssh", "external"} {
		err := Offered("etcd", backend, "", "").Check(faults)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "disk-stall") {
			t.Errorf("on --backend %s: %v", backend, err)
		}
	}
}
