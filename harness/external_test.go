package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/clusters"
)

// A run against a server lockpick did not start tests the lock and leaves every other key as it
// was, a key named like lockpick's own default key included; its own keys (a fencing token's
// counter outlives the run's leases) are gone.
func TestExternalTouchesOnlyItsKeys(t *testing.T) {
	ctx := context.Background()
	srv, err := clusters.StartLocal(ctx, clusters.Config{Nodes: 1, Dir: t.TempDir(), NamePrefix: "x"})
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
	before := dumpKeys(t, ctx, srv.Nodes()[0].Addr())

	cfg := Config{
		Lock: "fenced", Nemesis: "client-pause", Clients: 4, Keys: 1, Seed: 1, Store: t.TempDir(),
		TTL: Duration(500 * time.Millisecond), TimeLimit: Duration(3 * time.Second), Recovery: Duration(time.Second),
		Interval: Duration(time.Second), Backend: "external", Endpoints: []string{srv.Nodes()[0].Addr()},
	}
	out, err := Run(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Result.Stats.Acquires.OK == 0 {
		t.Fatalf("the lock was never granted: nothing was tested\n%s", out.Result.Summary())
	}
	if out.Result.Valid == checker.Invalid {
		t.Fatalf("fenced on one healthy server found invalid:\n%s", out.Result.Summary())
	}
	if after := dumpKeys(t, ctx, srv.Nodes()[0].Addr()); after != before {
		t.Fatalf("the server's keys changed:\nbefore %s\nafter  %s", before, after)
	}
}

// dumpKeys is every key on the server at addr with its serialised value, sorted.
func dumpKeys(t *testing.T, ctx context.Context, addr string) string {
	t.Helper()
	admin := clusters.AdminClient(addr)
	defer admin.Close()
	keys, err := admin.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		out = append(out, k+"="+admin.Dump(ctx, k).Val())
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
		{func(c *Config) { c.Lock = "sentinel" }, "so far"},
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
