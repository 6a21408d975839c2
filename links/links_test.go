package links

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockpick-dev/lockpick/clusters"
)

// A link carries traffic to its node, and a toxic on it is a real fault: a timeout toxic makes
// requests hang until the client gives up, and removing it heals the path.
func TestLinkCarriesTrafficAndToxicsCutIt(t *testing.T) {
	c, err := clusters.StartLocal(context.Background(), clusters.Config{Nodes: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	set := New()
	defer set.Close()
	node := c.Nodes()[0]
	l, err := set.Add("c1", node.Name, node.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if l.Addr == node.Addr() || l.Addr == "" {
		t.Fatalf("link listens on %q, want its own port", l.Addr)
	}
	if got, err := set.Get("c1", node.Name); err != nil || got != l {
		t.Fatalf("Get: %v %v", got, err)
	}
	if _, err := set.Get("c2", node.Name); err == nil {
		t.Fatal("Get found a link that does not exist")
	}
	rc := redis.NewClient(&redis.Options{Addr: l.Addr, MaxRetries: -1, DialerRetries: 1, ReadTimeout: 200 * time.Millisecond, DisableIdentity: true, Protocol: 2})
	defer rc.Close()
	ctx := context.Background()
	if err := rc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("through the link: %v", err)
	}

	if err := l.AddToxic(Toxic{Name: "cut", Type: "timeout", Stream: "upstream", Attributes: map[string]any{"timeout": 0}}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := rc.Get(ctx, "k").Err(); err == nil {
		t.Fatal("a request crossed a cut link")
	}
	if took := time.Since(began); took < 150*time.Millisecond {
		t.Fatalf("a cut link answered in %v: it should hang until the client times out", took)
	}
	if err := l.RemoveToxic(ctx, "cut"); err != nil {
		t.Fatal(err)
	}
	if v, err := rc.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after the heal: %q %v", v, err)
	}
}
