package harness

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
)

// Redlock under a partition that cuts group c1 from a majority: safe, c1 gets no lock while cut,
// and c2, which still sees every node, keeps getting locks.
func TestRedlockClientMajorityPartition(t *testing.T) {
	t.Parallel()
	const clients = 6
	out := run(t, Config{
		Lock: "redlock", Nemesis: "partition:kind=client-majority:group=c1:duration=1500ms", Clients: clients, ClientGroups: 2,
		Keys: 1, Seed: 2, NodeTimeout: Duration(200 * time.Millisecond), TTL: Duration(time.Second), TimeLimit: Duration(6 * time.Second), Recovery: Duration(500 * time.Millisecond),
		Interval: Duration(2 * time.Second),
	})
	if out.Result.Valid != checker.Valid || len(out.Errors) > 0 {
		t.Fatalf("want valid without run errors, got %v %v\n%s", out.Result.Valid, out.Errors, out.Result.Summary())
	}
	evs, err := history.ReadFile(filepath.Join(out.Dir, history.FileName))
	if err != nil {
		t.Fatal(err)
	}
	var cutAt int64 = -1
	var windows int
	invoked := map[int]int64{}
	okIn := map[string]int{}
	for _, e := range evs {
		switch {
		case e.IsNemesis() && e.Type == history.Invoke && strings.HasPrefix(e.F, "cut "):
			if !strings.HasPrefix(e.F, "cut c1/") || len(e.Nodes) != 3 {
				t.Fatalf("partition %q on %v, want c1 cut from 3 nodes", e.F, e.Nodes)
			}
			cutAt = e.Time
			windows++
		case e.IsNemesis() && e.Type == history.Info && strings.HasPrefix(e.F, "heal "):
			cutAt = -1
		case e.F == history.FAcquire && e.Type == history.Invoke:
			invoked[e.Process] = e.Time
		case e.F == history.FAcquire && e.Type == history.OK && cutAt >= 0 && invoked[e.Process] >= cutAt:
			okIn[[]string{"c1", "c2"}[(e.Process%clients)%2]]++
		}
	}
	if windows == 0 || okIn["c1"] != 0 || okIn["c2"] == 0 {
		t.Fatalf("%d partitions; ok acquires invoked and granted inside them: %v; want none for c1 and some for c2", windows, okIn)
	}
}
