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
	if cfg.Nodes != 5 || cfg.RestartDelay != Duration(3*time.Second) || cfg.NodeTimeout != Duration(100*time.Millisecond) || cfg.HoldMax != Duration(500*time.Millisecond) {
		t.Fatalf("unexpected defaults: %+v", cfg)
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
