package nemesis

import (
	"testing"

	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/systems"
)

// probeOver is the Redis locks' lease probe over every node of a local cluster.
func probeOver(t *testing.T, c *systems.Local) systems.LeaseProbe {
	t.Helper()
	var nodes []systems.Node
	for _, n := range c.Nodes() {
		nodes = append(nodes, systems.Node{Name: n.Name, Role: systems.RoleMaster, Addr: n.Addr(), Data: true})
	}
	p, err := locks.NewProbe("redlock", nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
