package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/systems"
)

// A run against a server lockpick did not start tests the lock and leaves every other key as it
// was, a key named like lockpick's own default key included; its own keys (a fencing token's
// counter outlives the run's leases) are gone.
func TestExternalTouchesOnlyItsKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := systems.StartLocal(ctx, systems.LocalConfig{Nodes: 1, Dir: t.TempDir(), NamePrefix: "x"})
	if err != nil {
		t.Skipf("no redis-server: %v", err)
	}
	defer srv.Close()
	admin := srv.Nodes()[0].Admin()
	defer admin.Close()
	for i := range 20 {
		admin.Set(ctx, fmt.Sprintf("app:%d", i), i, 0)
	}
	admin.Set(ctx, "lockpick:0", "someone else's", time.Hour)
	admin.HSet(ctx, "app:cfg", "a", 1)
	addr := srv.Nodes()[0].Addr()
	runExternal(t, "fenced", []string{addr}, "", func() string { return dumpKeys(t, ctx, addr) })
}

// runExternal runs lock with client pauses against endpoints someone else runs, and fails unless
// the lock was granted, found safe, and dump gives after the run what it gave before.
func runExternal(t *testing.T, lock string, endpoints []string, master string, dump func() string) {
	t.Helper()
	before := dump()
	out, err := Run(context.Background(), Config{
		Lock: lock, Nemesis: "client-pause", Clients: 4, Keys: 1, Seed: 1, Store: t.TempDir(),
		TTL: Duration(time.Second), TimeLimit: Duration(3 * time.Second), Recovery: Duration(time.Second),
		Interval: Duration(time.Second), Backend: "external", Endpoints: endpoints, MasterName: master,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Result.Stats.Acquires.OK == 0 {
		t.Fatalf("the lock was never granted: nothing was tested\n%s", out.Result.Summary())
	}
	if out.Result.Valid == checker.Invalid {
		t.Fatalf("%s on healthy servers found invalid:\n%s", lock, out.Result.Summary())
	}
	if after := dump(); after != before {
		t.Fatalf("the servers' keys changed:\nbefore %s\nafter  %s", before, after)
	}
}

// dumpKeys is every key on the server at addr with its serialised value, sorted.
func dumpKeys(t *testing.T, ctx context.Context, addr string) string {
	t.Helper()
	admin := systems.AdminClient(addr)
	defer admin.Close()
	keys, err := admin.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		out = append(out, k+"="+strconv.Quote(admin.Dump(ctx, k).Val()))
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}

// The external backend refuses what would touch a server, each with one line naming the fix.
func TestExternalRefusals(t *testing.T) {
	base := Config{Lock: "single", Clients: 2, Keys: 1, TTL: Duration(time.Second), TimeLimit: Duration(3 * time.Second),
		Backend: "external", Endpoints: []string{"127.0.0.1:6399"}, Store: t.TempDir()}
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Nemesis = "restart" }, "client-side faults"},
		{func(c *Config) { c.Nemesis = "pause:target=one" }, "client-side faults"},
		{func(c *Config) { c.Nemesis = "clock" }, "client-side faults"},
		{func(c *Config) { c.Nemesis = "latency:paths=peers" }, "drop paths=peers"},
		{func(c *Config) { c.Persistence = "aof-always" }, "drop --persistence"},
		{func(c *Config) { c.Endpoints = nil }, "add --endpoints"},
		{func(c *Config) { c.Endpoints = []string{"nocolon"} }, "not host:port"},
		{func(c *Config) { c.Lock = "redlock"; c.Endpoints = []string{"a:1", "b:1"} }, "--endpoints are the nodes"},
		{func(c *Config) { c.Lock = "sentinel" }, "add --master-name"},
		{func(c *Config) { c.MasterName = "prod" }, "uses no sentinel"},
		{func(c *Config) { c.Lock = "etcd"; c.EtcdServer = "current" }, "drop it"},
		{func(c *Config) { c.Lock = "etcd"; c.Nemesis = "restart:target=leader" }, "client-side faults"},
	} {
		cfg := base
		c.edit(&cfg)
		err := cfg.Resolve()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: got %v, want one line with %q", cfg.Nemesis, err, c.want)
		}
	}
	cfg := base
	cfg.Nemesis = "partition,client-pause,client-crash,client-clock,latency"
	if err := cfg.Resolve(); err != nil {
		t.Fatalf("client-side faults refused: %v", err)
	}
	if !strings.HasPrefix(cfg.KeyPrefix, "lockpick-") || !strings.HasPrefix(cfg.KeyNames()[0], cfg.KeyPrefix) {
		t.Fatalf("keys %v lack a unique prefix", cfg.KeyNames())
	}
}

// The same against an etcd lockpick did not start for the run: every other key keeps its value and
// revisions, one named like lockpick's default key included.
func TestExternalEtcdTouchesOnlyItsKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := systems.FindEtcd(ctx, systems.EtcdSystem, nil)
	if err != nil {
		t.Skipf("no etcd: %v", err)
	}
	theirs, err := systems.Start(ctx, "etcd", systems.Config{Dir: t.TempDir(), Groups: []string{"x"}, Etcd: systems.EtcdConfig{Members: 1, Server: srv.Path}})
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()
	addr := theirs.Nodes()[0].Addr
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, k := range []string{"app/1", "app/2", "lockpick:0", "lockpick:0/abc"} {
		if _, err := cli.Put(ctx, k, "theirs"); err != nil {
			t.Fatal(err)
		}
	}
	dump := func() string {
		r, err := cli.Get(ctx, "", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, kv := range r.Kvs {
			out = append(out, fmt.Sprintf("%s=%s@%d/%d/%d", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version))
		}
		return strings.Join(out, " ")
	}
	runExternal(t, "etcd", []string{addr}, "", dump)
}

// The sentinel locks against a primary, a replica and a sentinel started here by hand (not by
// lockpick): the run finds the nodes through the sentinel, and leaves every key of the primary and
// the replica, and the sentinel's view of the master, as they were.
func TestExternalSentinelTouchesOnlyItsKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bin, err := systems.FindRedisServer("")
	if err != nil {
		t.Skipf("no redis-server: %v", err)
	}
	dir := t.TempDir()
	ports := freePorts(t, 3)
	primary, replica, sentinel := "127.0.0.1:"+ports[0], "127.0.0.1:"+ports[1], "127.0.0.1:"+ports[2]
	conf := filepath.Join(dir, "sentinel.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf("port %s\nsentinel monitor prod 127.0.0.1 %s 1\nsentinel down-after-milliseconds prod 5000\n", ports[2], ports[0])), 0o644)
	for _, args := range [][]string{
		{"--port", ports[0], "--save", "", "--dir", dir},
		{"--port", ports[1], "--save", "", "--dir", dir, "--replicaof", "127.0.0.1", ports[0]},
		{conf, "--sentinel"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	// All three must listen before the first dump reads the replica.
	for _, addr := range []string{primary, replica, sentinel} {
		for deadline := time.Now().Add(10 * time.Second); systems.PingOnce(ctx, addr) != nil; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the hand-started server at %s does not answer", addr)
			}
		}
	}
	admin := systems.AdminClient(primary)
	defer admin.Close()
	if err := admin.Set(ctx, "app:1", "theirs", 0).Err(); err != nil {
		t.Fatal(err)
	}
	admin.Set(ctx, "lockpick:0", "theirs", 0)
	// Both servers' keys once the replica has caught up with the primary.
	dump := func() string {
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			p, r := dumpKeys(t, ctx, primary), dumpKeys(t, ctx, replica)
			if p == r {
				return p
			}
			if time.Now().After(deadline) {
				t.Fatalf("the replica never caught up:\nprimary %s\nreplica %s", p, r)
			}
		}
	}
	runExternal(t, "sentinel-fenced", []string{sentinel}, "prod", dump)
}

// freePorts are count loopback ports below the ephemeral range, free a moment ago: no client's
// outgoing connection takes one before the hand-started server binds it.
func freePorts(t *testing.T, count int) []string {
	ls, err := systems.ReservePorts(count)
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, l := range ls {
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
		l.Close()
	}
	return ports
}
