package nemesis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/links"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/systems"
	"github.com/lockpick-dev/lockpick/workloads"
)

// Kleppmann's clock scenario, with the partition made by hand: client group c1 is cut from n4 and
// n5, so its leases are held by the bare majority n1 n2 n3, while c2 reaches all five nodes. The
// holder-one target waits for such a lease and jumps one of its nodes forward past the TTL; the key
// expires there, and a c2 client gets that node plus n4 and n5 while the c1 holder still holds.
//
// A jump only breaks Redlock when c2's client asks for the jumped node inside the window the jump
// opens; on a loaded machine a 10 s run can miss every window. The test gives the nemesis three
// runs of 10 s, each on fresh nodes, and fails when none shows the violation the clock jump caused:
// a holder-one that never breaks Redlock fails all three.
func TestClockHolderOneBreaksRedlockWithABareMajority(t *testing.T) {
	if testing.Short() {
		t.Skip("runs redis-server for 10 to 30 s")
	}
	ctx := context.Background()
	shim, err := systems.BuildClockShim(ctx, t.TempDir())
	if errors.Is(err, systems.ErrNoCompiler) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	const runs = 3
	for run := 1; ; run++ {
		dir := t.TempDir()
		// LOCKPICK_KEEP=dir keeps the history and node logs for a look with `lockpick check dir`.
		if keep := os.Getenv("LOCKPICK_KEEP"); keep != "" {
			dir = filepath.Join(keep, fmt.Sprint(run))
		}
		res, jumps, report := clockHolderOneRun(t, ctx, shim, dir)
		if res.Valid == checker.Invalid && len(res.Violations) > 0 && strings.Contains(res.Violations[0].Cause, "clock bump-forward") {
			t.Logf("run %d: %d jumps, %d violations:\n%s", run, jumps, res.ViolationCount, res.Summary())
			return
		}
		if run == runs {
			t.Fatalf("no run of %d showed the violation: the last one's verdict %v after %d holder-one jumps, want invalid with the cause naming the clock jump:\n%s", runs, res.Valid, jumps, report)
		}
		t.Logf("run %d: verdict %v after %d jumps, no violation caused by the jump; running again on fresh nodes", run, res.Valid, jumps)
	}
}

// clockHolderOneRun is one run of TestClockHolderOneBreaksRedlockWithABareMajority in dir: its
// check, the number of jumps, and what to show when it found no violation.
func clockHolderOneRun(t *testing.T, ctx context.Context, shim, dir string) (*checker.Result, int, string) {
	t.Helper()
	cluster, err := systems.StartLocal(ctx, systems.LocalConfig{Nodes: 5, Dir: filepath.Join(dir, "nodes"), ClockShim: shim})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	set := links.New()
	defer set.Close()
	groups := []string{"c1", "c2"}
	probe := probeOver(t, cluster)
	for _, n := range cluster.Nodes() {
		for _, g := range groups {
			l, err := set.Add(g, n.Name, n.Addr())
			if err != nil {
				t.Fatal(err)
			}
			if g == "c1" && (n.Name == "n4" || n.Name == "n5") {
				for _, stream := range []string{"upstream", "downstream"} {
					if err := l.AddToxic(links.Toxic{Name: "cut-" + stream, Type: "timeout", Stream: stream, Attributes: map[string]any{"timeout": 0}}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}

	const ttl, limit = 2 * time.Second, 10 * time.Second
	rec, err := history.Create(filepath.Join(dir, history.FileName), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Clocks: cluster, Cluster: cluster, Nodes: fiveNodes, Links: set, Groups: groups, Probe: probe,
		Keys: []string{workloads.KeyName(0)}, TTL: ttl, Interval: 2 * time.Second, NodeTimeout: 100 * time.Millisecond, Recorder: rec}
	spec, _ := ParseSpec("clock:target=holder-one:jump=forward:interval=1s:duration=500ms:wait=2s")
	nem, err := Build(spec, env)
	if err != nil {
		t.Fatal(err)
	}
	plan := nem.Plan(Seed(1, "clock"), limit)
	if len(plan) == 0 {
		t.Fatal("empty plan")
	}
	wenv := workloads.Env{Recorder: rec, NewLocker: func(p int) (locks.Locker, error) {
		// Nine clients in c1, one in c2: c1 holds the lock most of the time (bare-majority leases for
		// holder-one to find), and c2 stands ready to take the jumped node. (With two in c2, whose
		// rounds reach all five nodes and no longer release on the nodes that refused them, c2 held
		// the lock too often for holder-one to find a bare majority in its wait.)
		g := "c1"
		if p%10 == 9 {
			g = "c2"
		}
		var eps []locks.Endpoint
		for _, n := range fiveNodes {
			l, err := set.Get(g, n)
			if err != nil {
				return nil, err
			}
			eps = append(eps, locks.Endpoint{Node: n, Addr: l.Addr})
		}
		return locks.New("redlock", eps, locks.Options{NodeTimeout: 100 * time.Millisecond})
	}}
	faultCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	workCtx, cancelWork := context.WithTimeout(ctx, limit+time.Second)
	defer cancelWork()
	done := make(chan error, 1)
	go func() {
		done <- workloads.Mutex{Clients: 10, Keys: 1, TTL: ttl, Seed: 1}.Run(workCtx, wenv)
	}()
	if err := Run(faultCtx, nem, plan, rec); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	events, err := history.ReadFile(filepath.Join(dir, history.FileName))
	if err != nil {
		t.Fatal(err)
	}
	jumps := 0
	for _, e := range events {
		if e.IsNemesis() && e.Type == history.Invoke && e.F == FBumpForward {
			jumps++
			// The jump hit one node of a c1 lease: one of n1 n2 n3.
			if len(e.Nodes) != 1 {
				t.Fatalf("holder-one jumped %v", e.Nodes)
			}
		}
		if e.IsNemesis() && e.Type == history.Info && e.F == FBumpForward {
			if off := time.Duration(e.Offsets[e.Nodes[0]]); off < 4*time.Second-5*time.Millisecond || off > 4*time.Second+5*time.Millisecond {
				t.Fatalf("measured offset %v, want 4s", off)
			}
		}
	}
	if jumps == 0 {
		t.Fatal("no jump happened")
	}
	res, err := checker.Check(events, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var report strings.Builder
	var first int64 = -1
	for _, e := range events {
		if e.IsNemesis() && e.F == FBumpForward && first < 0 {
			first = e.Time
		}
		if first >= 0 && e.Time > first-100e6 && e.Time < first+100e6 && e.F != history.FWork {
			fmt.Fprintf(&report, "%10.6f p%d %s %s %v %s %s\n", float64(e.Time)/1e9, e.Process, e.Type, e.F, e.Nodes, e.Value, e.Error)
		}
	}
	report.WriteString(res.Summary())
	return res, jumps, report.String()
}
