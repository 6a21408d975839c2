package systems

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Linked, each client group reaches each master through its own link; direct (no fault of the run
// goes through links), at the master's own address, with no link made. Both ways the endpoint serves.
func TestMastersEndpointsDirectOrLinked(t *testing.T) {
	ctx := context.Background()
	for _, direct := range []bool{false, true} {
		sys, err := Start(ctx, "redis-masters", Config{Dir: t.TempDir(), Nodes: 2, Groups: []string{"c1", "c2"}, Direct: direct})
		if err != nil {
			t.Fatal(err)
		}
		defer sys.Close()
		if n := len(sys.Links().All()); direct && n != 0 || !direct && n != 4 {
			t.Errorf("direct %v: %d links", direct, n)
		}
		for _, g := range []string{"c1", "c2"} {
			eps, err := sys.Endpoints(g)
			if err != nil || len(eps) != 2 {
				t.Fatalf("direct %v, group %s: %v %v", direct, g, eps, err)
			}
			for i, ep := range eps {
				node := sys.Nodes()[i]
				if (ep.Addr == node.Addr) != direct || ep.Known != node.Addr || ep.Node != node.Name {
					t.Errorf("direct %v, group %s: endpoint %+v of node %+v", direct, g, ep, node)
				}
				c := redis.NewClient(&redis.Options{Addr: ep.Addr, MaxRetries: -1})
				if err := c.Ping(ctx).Err(); err != nil {
					t.Errorf("direct %v: %s does not serve: %v", direct, ep.Addr, err)
				}
				c.Close()
			}
		}
	}
}
