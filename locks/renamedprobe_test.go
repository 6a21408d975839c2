package locks

import (
	"context"
	"testing"

	"github.com/lockpick-dev/lockpick/systems"
)

// The probes of libraries that store a lease under a name of their own find it there, as the
// library wrote it (malkusch/lock's lock_KEY, tooz's reprs of its bytes), and nothing under KEY.
func TestRenamedKeyProbesFindTheLibrariesKeys(t *testing.T) {
	c, _, admins := cluster(t, 1)
	n := c.Nodes()[0]
	nodes := []systems.Node{{Name: n.Name, Role: systems.RoleMaster, Addr: n.Addr(), Data: true}}
	ctx := context.Background()
	for lock, stored := range map[string]string{"php-malkusch": "lock_k", "py-tooz": "b'_tooz'_b'k'_lock"} {
		if err := admins[0].FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		p, err := NewProbe(lock, nodes)
		if err != nil {
			t.Fatal(err)
		}
		admins[0].Set(ctx, "k", "not-this", 0)
		admins[0].Set(ctx, stored, "v1", 0)
		leases := p.Leases(ctx, []string{"k"})
		p.Close()
		if len(leases) != 1 || leases[0].Value != "v1" {
			t.Errorf("%s: leases %+v, want the one stored under %s with value v1", lock, leases, stored)
		}
	}
}
