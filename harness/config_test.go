package harness

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func baseConfig(t *testing.T) Config {
	return Config{
		Lock: "single", Nemesis: "none", Clients: 3, Keys: 1,
		TTL: Duration(time.Second), TimeLimit: Duration(3 * time.Second), Store: t.TempDir(),
	}
}

// Bad input never starts a run and gets an error that names the flag and the fix.
func TestBadInputIsAStartError(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o644)

	cases := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"unknown lock", func(c *Config) { c.Lock = "zookeeper" }, "--lock"},
		{"unknown nemesis", func(c *Config) { c.Nemesis = "meteor" }, "--nemesis"},
		{"zero ttl", func(c *Config) { c.TTL = 0 }, "--ttl"},
		{"time limit below ttl", func(c *Config) { c.TimeLimit = Duration(500 * time.Millisecond) }, "--time-limit"},
		{"no clients", func(c *Config) { c.Clients = 0 }, "--clients"},
		{"bad persistence", func(c *Config) { c.Persistence = "rdb" }, "--persistence"},
		{"unwritable store", func(c *Config) { c.Store = filepath.Join(file, "store") }, "--store"},
		{"port in use", func(c *Config) { c.BasePort = port }, "port " + strconv.Itoa(port) + " is in use"},
		{"missing redis-server", func(c *Config) { c.RedisServer = "/nonexistent/redis-server" }, "apt-get install redis-server"},
		{"bad clock parameter", func(c *Config) { c.Nemesis = "clock:jump=sideways" }, "jump=sideways"},
		{"missing clock shim", func(c *Config) { c.Nemesis = "clock"; c.ClockShim = "/nonexistent/libclockshim.so" }, "--nemesis clock: clock shim"},
		{"disk stall on redis without fsyncs", func(c *Config) { c.Nemesis = "disk-stall" }, "add --persistence aof-always"},
		{"disk stall on postgres", func(c *Config) { c.Lock, c.Nemesis = "pg-lease", "disk-stall" }, "fsync=off"},
		{"negative nodes", func(c *Config) { c.Nodes = -1 }, "--nodes must be at least 1"},
		{"single on three nodes", func(c *Config) { c.Nodes = 3 }, "--lock single uses one node, got --nodes 3"},
		{"fenced on two nodes", func(c *Config) { c.Lock, c.Nodes = "fenced", 2 }, "--lock fenced uses one node"},
		{"redlock on four nodes", func(c *Config) { c.Lock, c.Nodes = "redlock", 4 }, "--allow-even-nodes"},
		{"redlock on two nodes", func(c *Config) { c.Lock, c.Nodes = "redlock", 2 }, "got --nodes 2: use --nodes 3 (an even"},
		{"redlock on one node", func(c *Config) { c.Lock, c.Nodes = "redlock", 1 }, "--lock single"},
		{"negative interval", func(c *Config) { c.Interval = -1 }, "--interval must be positive"},
		{"negative check timeout", func(c *Config) { c.CheckTimeout = Duration(-time.Second) }, "--check-timeout must be positive"},
		{"too many clients", func(c *Config) { c.Clients = MaxClients + 1 }, "--clients must lie between 1 and 1000, got 1001"},
		{"hold-max on counter", func(c *Config) { c.Workload, c.HoldMax = "counter", Duration(time.Second) }, "--hold-max applies to the mutex workload"},
		{"hold-min on counter", func(c *Config) { c.Workload, c.HoldMin = "counter", Duration(time.Second) }, "--hold-min applies to the mutex workload"},
		{"hold-min without hold-max", func(c *Config) { c.HoldMin = Duration(time.Second) }, "--hold-min 1s raises the floor of holds drawn uniformly up to --hold-max: add --hold-max (for example --hold-max 2s)"},
		{"hold-min above hold-max", func(c *Config) { c.HoldMin, c.HoldMax = Duration(2*time.Second), Duration(time.Second) }, "--hold-min 2s is above --hold-max 1s"},
		{"negative hold-min", func(c *Config) { c.HoldMin, c.HoldMax = Duration(-time.Second), Duration(time.Second) }, "--hold-min must not be negative"},
		{"careful on counter", func(c *Config) { c.Workload, c.Careful = "counter", true }, "--careful applies to the mutex workload"},
		{"extend and careful", func(c *Config) { c.Extend, c.Careful = true, true }, "--extend and --careful together"},
		{"extend with hold-max", func(c *Config) { c.Extend, c.HoldMax = true, Duration(time.Second) }, "--extend draws work across three validities"},
		{"extend on a watchdog lock", func(c *Config) { c.Lock, c.Extend = "watchdog", true }, "--extend: --lock watchdog cannot renew a lease on request"},
		{"counter extend on a watchdog lock", func(c *Config) { c.Workload, c.Lock, c.Extend = "counter", "watchdog", true }, "--extend: --lock watchdog cannot renew a lease on request"},
		{"extend on the naive lock", func(c *Config) { c.Lock, c.Extend = "setnx-del", true }, "drop --extend"},
		{"go-zero with a TTL not in whole seconds", func(c *Config) { c.Lock, c.TTL = "go-zero", Duration(1500*time.Millisecond) }, "--lock go-zero takes its TTL in whole seconds"},
		{"careful on a watchdog lock", func(c *Config) { c.Lock, c.Careful = "r2m", true }, "promises no deadline to check"},
		{"watchdog timeout on single", func(c *Config) { c.WatchdogTimeout = Duration(time.Second) }, "--watchdog-timeout applies to watchdog locks"},
		{"negative watchdog timeout", func(c *Config) { c.Lock, c.WatchdogTimeout = "watchdog", Duration(-time.Second) }, "--watchdog-timeout must not be negative"},
		{"crash point of another lock", func(c *Config) { c.Nemesis = "client-crash:point=after-setnx" }, "no such step"},
		{"unknown crash point", func(c *Config) { c.Nemesis = "client-crash:point=sideways" }, "point=sideways"},
		{"clock on etcd", func(c *Config) { c.Lock, c.Nemesis = "etcd", "clock" }, "--nemesis clock moves a server's clock (node clocks), and etcd members are Go programs that read the time without libc"},
		{"peer cuts without peers", func(c *Config) { c.Lock, c.Nemesis = "redlock", "partition:paths=peers" }, "the servers of redis-masters never talk to each other: use a lock that runs on redis-sentinel or etcd or zookeeper or postgres, or drop paths=peers"},
		{"netcut on local nodes", func(c *Config) { c.Nemesis = "netcut" }, "(network cuts), and --backend local nodes share the loopback interface: use --backend docker"},
		{"failover without replicas", func(c *Config) { c.Nemesis = "failover" }, "(promotion), and redis-masters has no primary whose replicas take over: use a lock that runs on redis-sentinel"},
		{"name escaping the store", func(c *Config) { c.Name = "../x" }, "--name \"../x\" is not a plain name"},
		{"name with a slash", func(c *Config) { c.Name = "a/b" }, "is not a plain name"},
		{"hidden name", func(c *Config) { c.Name = ".x" }, "not starting with a dot"},
		{"name latest", func(c *Config) { c.Name = "latest" }, "--name latest is taken by the store itself"},
		{"name matrix", func(c *Config) { c.Name = "matrix" }, "--name matrix is taken"},
		{"client without a command", func(c *Config) { c.Lock = "client" }, "--lock client needs the program to run: add --client-cmd"},
		{"client command missing", func(c *Config) { c.Lock, c.ClientCmd = "client", []string{"./no/such/client"} }, `--client-cmd: cannot run "./no/such/client"`},
		{"client command on a built-in lock", func(c *Config) { c.ClientCmd = []string{"true"} }, "belong to --lock client, not --lock single"},
		{"unknown client capability", func(c *Config) { c.Lock, c.ClientCmd, c.ClientCaps = "client", []string{"true"}, []string{"telepathy"} }, `unknown capability "telepathy"`},
		{"host clock on local nodes", func(c *Config) { c.Nemesis = "clock:source=host" }, "--nemesis clock with source=host needs host clocks, and --backend local nodes share this machine's clock, which lockpick does not move: use --backend ssh"},
		{"host clock not allowed", func(c *Config) {
			c.Backend, c.SSHHosts, c.SSHKey, c.SSHFingerprints, c.Nemesis = "ssh", []string{"n1"}, "config_test.go", []string{"SHA256:x"}, "clock:source=host"
		}, "steps and slews the real clocks of the --hosts as root (every process there sees it; restored at the heal, the run's end and by lockpick clean): allow it with --allow-host-clock"},
		{"host clock allowed, unused", func(c *Config) { c.AllowHostClock = "yes" }, "--allow-host-clock allows clock:source=host, and no --nemesis moves the hosts' clocks"},
		{"host clock allowed badly", func(c *Config) { c.AllowHostClock = "always" }, "--allow-host-clock=always: use --allow-host-clock (hosts with kernels of their own) or --allow-host-clock=shared"},
		{"extend on a client without it", func(c *Config) { c.Lock, c.ClientCmd, c.Extend = "client", []string{"true"}, true }, "--lock client cannot renew"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(t)
			tc.mutate(&cfg)
			_, err := Run(context.Background(), cfg, nil)
			var se *StartError
			if !errors.As(err, &se) {
				t.Fatalf("want a StartError, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

func TestResolveDefaults(t *testing.T) {
	cfg := Config{Lock: "redlock", Nemesis: "restart-delayed", Clients: 10, Keys: 1, TTL: Duration(2 * time.Second), TimeLimit: Duration(10 * time.Second)}
	if err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	if cfg.Nodes != 5 || cfg.RestartDelay != Duration(3*time.Second) || cfg.NodeTimeout != Duration(500*time.Millisecond) || cfg.HoldMax != 0 || cfg.ThinkMax != Duration(200*time.Millisecond) {
		t.Fatalf("unexpected defaults: %+v", cfg)
	}
	if !filepath.IsAbs(cfg.Store) || CheckName(cfg.Name) != nil {
		t.Fatalf("store %q not absolute or name %q not plain", cfg.Store, cfg.Name)
	}
	// Resolving twice changes nothing: the CLI, scenario files and Run each resolve.
	again := cfg
	if err := again.Resolve(); err != nil || again.Name != cfg.Name || again.ThinkMax != cfg.ThinkMax || again.Store != cfg.Store {
		t.Fatalf("a second Resolve changed the config: %+v, %v", again, err)
	}
	even := Config{Lock: "redlock", Nodes: 4, AllowEvenNodes: true, Clients: 1, Keys: 1, TTL: Duration(time.Second), TimeLimit: Duration(2 * time.Second)}
	if err := even.Resolve(); err != nil {
		t.Fatalf("redlock on 4 nodes with AllowEvenNodes: %v", err)
	}
	single := Config{Lock: "single", Nemesis: "none", Clients: 1, Keys: 1, TTL: Duration(time.Second), TimeLimit: Duration(2 * time.Second)}
	if err := single.Resolve(); err != nil || single.Nodes != 1 {
		t.Fatalf("single: nodes %d, err %v", single.Nodes, err)
	}
}

func TestOnlyClockNemesesNeedTheShim(t *testing.T) {
	for spec, want := range map[string]bool{"none": false, "restart": false, "clock": true, "restart,clock:jump=back": true} {
		cfg := Config{Lock: "redlock", Nemesis: spec, Clients: 10, Keys: 1, TTL: Duration(2 * time.Second), TimeLimit: Duration(10 * time.Second)}
		if err := cfg.Resolve(); err != nil {
			t.Fatal(err)
		}
		if got := cfg.NeedsClocks(); got != want {
			t.Errorf("%s: NeedsClocks %v, want %v", spec, got, want)
		}
	}
}

// Only the nemeses that put faults on links make a run's clients go through links.
func TestOnlyNetworkNemesesNeedLinks(t *testing.T) {
	for spec, want := range map[string]bool{
		"none": false, "restart": false, "restart-delayed,pause": false, "clock": false, "client-pause": false,
		"partition": true, "restart,latency": true, "failover": true,
	} {
		lock := "redlock"
		if spec == "failover" {
			lock = "sentinel"
		}
		cfg := Config{Lock: lock, Nemesis: spec, Clients: 10, Keys: 1, TTL: Duration(2 * time.Second), TimeLimit: Duration(10 * time.Second)}
		if err := cfg.Resolve(); err != nil {
			t.Fatal(err)
		}
		if got := cfg.NeedsLinks(); got != want || cfg.systemConfig("", "", nil).Direct == want {
			t.Errorf("%s: NeedsLinks %v, want %v", spec, got, want)
		}
	}
}

// The think time keeps a key's load about constant as clients are added, within [20ms, TTL].
func TestDefaultThinkMax(t *testing.T) {
	cases := []struct {
		clients, keys int
		ttl, want     time.Duration
	}{
		{1, 1, 2 * time.Second, 20 * time.Millisecond},
		{10, 1, 2 * time.Second, 200 * time.Millisecond},
		{100, 10, 2 * time.Second, 200 * time.Millisecond},
		{1000, 1, 2 * time.Second, 2 * time.Second},
		{5, 10, 2 * time.Second, 20 * time.Millisecond},
	}
	for _, c := range cases {
		if got := DefaultThinkMax(c.clients, c.keys, c.ttl); got != c.want {
			t.Errorf("DefaultThinkMax(%d, %d, %v) = %v, want %v", c.clients, c.keys, c.ttl, got, c.want)
		}
	}
}

// The liveness window of an etcd run counts what etcd lets a dead client's lease live: the session's
// TTL in whole seconds and the election timeout a new leader adds to every lease.
func TestExpiryOfAnEtcdLease(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Lock, cfg.TTL = "etcd", Duration(1500*time.Millisecond)
	if got := cfg.Expiry(); got != 3*time.Second {
		t.Fatalf("etcd expiry with a 1.5s TTL: %v, want 2s (whole seconds) + 1s (election timeout)", got)
	}
	cfg.Lock = "single"
	if got := cfg.Expiry(); got != 1500*time.Millisecond {
		t.Fatalf("single's expiry: %v, want its TTL", got)
	}
}

// postgres takes one streaming replica and --synchronous with it; --synchronous without a replica,
// or on another system, and two replicas are refused in one line naming the fix.
func TestPostgresReplicasAndSynchronous(t *testing.T) {
	base := func() Config {
		return Config{Lock: "pg-lease", Nemesis: "none", Clients: 1, Keys: 1, TTL: Duration(time.Second), TimeLimit: Duration(2 * time.Second)}
	}
	ok := base()
	ok.Replicas, ok.Synchronous = 1, true
	if err := ok.Resolve(); err != nil {
		t.Fatalf("pg-lease with one synchronous replica: %v", err)
	}
	if sc := ok.systemConfig("", "", nil); sc.Postgres.Replicas != 1 || !sc.Postgres.Synchronous {
		t.Fatalf("system config %+v: want one synchronous replica", sc.Postgres)
	}
	for _, c := range []struct {
		replicas int
		sync     bool
		lock     string
		want     string
	}{
		{0, true, "pg-lease", "--replicas 1"},
		{2, false, "pg-lease", "--replicas 1"},
		{2, true, "sentinel", "drop --synchronous"},
	} {
		cfg := base()
		cfg.Lock, cfg.Replicas, cfg.Synchronous = c.lock, c.replicas, c.sync
		err := cfg.Resolve()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with %d replicas, synchronous %v: %v, want an error naming %q", c.lock, c.replicas, c.sync, err, c.want)
		}
	}
}
