package harness

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/results"
	"github.com/lockpick-dev/lockpick/systems"
)

func run(t *testing.T, cfg Config) *Outcome {
	t.Helper()
	cfg.Store = t.TempDir()
	out, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{results.ConfigFile, results.ScheduleFile, history.FileName, results.ResultsFile, results.SummaryFile, results.VisualizationFile, "nodes/n1/redis.log"} {
		if _, err := os.Stat(filepath.Join(out.Dir, f)); err != nil {
			t.Errorf("run directory lacks %s", f)
		}
	}
	if latest, err := filepath.EvalSymlinks(filepath.Join(cfg.Store, "latest")); err != nil || latest != out.Dir {
		t.Errorf("store/latest points at %q (%v), want %q", latest, err, out.Dir)
	}
	// The stored history gives the same verdict when checked again.
	again, err := Check(out.Dir, time.Minute, results.RunInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Valid != out.Result.Valid || again.ViolationCount != out.Result.ViolationCount {
		t.Errorf("re-check gave %v with %d violations, the run %v with %d", again.Valid, again.ViolationCount, out.Result.Valid, out.Result.ViolationCount)
	}
	return out
}

// A single Redis node restarted without persistence forgets the lock while its holder still works.
// The restart is aimed at the node just after it granted a lease, and holds last long enough that
// the holder still works when the node comes back empty: the violation is made, not hoped for.
func TestSingleRestartIsInvalid(t *testing.T) {
	t.Parallel()
	out := run(t, Config{
		Lock: "single", Nemesis: "restart:target=holder", Clients: 6, Keys: 1, Seed: 3,
		HoldMax: Duration(800 * time.Millisecond),
		TTL:     Duration(time.Second), TimeLimit: Duration(8 * time.Second), Recovery: Duration(time.Second),
		Interval: Duration(1500 * time.Millisecond),
	})
	if out.Result.Valid != checker.Invalid || len(out.Result.Violations) == 0 {
		t.Fatalf("want invalid with a violation listed, got %v\n%s", out.Result.Valid, out.Result.Summary())
	}
	v := out.Result.Violations[0]
	var killed bool
	for _, e := range v.Nemesis {
		killed = killed || e.F == "kill"
	}
	if !killed {
		t.Errorf("the first violation does not show the kill that caused it: %+v", v)
	}
	if len(out.Errors) > 0 {
		t.Errorf("run errors: %v", out.Errors)
	}
}

func TestRedlockWithoutFaultsIsValid(t *testing.T) {
	t.Parallel()
	out := run(t, Config{
		Lock: "redlock", Nemesis: "none", Clients: 8, Keys: 2, Seed: 4, NodeTimeout: Duration(200 * time.Millisecond),
		TTL: Duration(time.Second), TimeLimit: Duration(5 * time.Second), Recovery: Duration(500 * time.Millisecond),
	})
	if out.Result.Valid != checker.Valid {
		t.Fatalf("want valid, got %v\n%s", out.Result.Valid, out.Result.Summary())
	}
	if out.Result.Stats.Acquires.OK < 10 {
		t.Fatalf("only %d ok acquires in 5s", out.Result.Stats.Acquires.OK)
	}
}

// Nodes kept down longer than the TTL come back without breaking Redlock, and while a majority is
// up the lock is still granted.
func TestRedlockDelayedRestartIsValid(t *testing.T) {
	t.Parallel()
	out := run(t, Config{
		Lock: "redlock", Nemesis: "restart-delayed", Clients: 8, Keys: 1, Seed: 5, NodeTimeout: Duration(100 * time.Millisecond),
		TTL: Duration(500 * time.Millisecond), TimeLimit: Duration(10 * time.Second), Recovery: Duration(500 * time.Millisecond),
		Interval: Duration(time.Second),
	})
	if out.Result.Valid != checker.Valid {
		t.Fatalf("want valid, got %v\n%s", out.Result.Valid, out.Result.Summary())
	}
	if len(out.Result.Faults) == 0 {
		t.Fatal("no faults were injected")
	}
	if out.Result.Stats.OKInFaults == 0 {
		t.Fatalf("no lock granted during faults\n%s", out.Result.Summary())
	}
	b, _ := os.ReadFile(filepath.Join(out.Dir, results.SummaryFile))
	if !strings.Contains(string(b), "VALID") {
		t.Errorf("summary.txt does not state the verdict:\n%s", b)
	}
}

// Redlock with a majority restarted at once without persistence: a second client gets a quorum of
// empty nodes while the first still holds the lock.
func TestRedlockRestartIsInvalid(t *testing.T) {
	t.Parallel()
	out := run(t, Config{
		Lock: "redlock", Nemesis: "restart:target=holder-majority", Clients: 10, Keys: 1, Seed: 1, NodeTimeout: Duration(200 * time.Millisecond),
		HoldMax: Duration(800 * time.Millisecond),
		TTL:     Duration(time.Second), TimeLimit: Duration(15 * time.Second), Recovery: Duration(500 * time.Millisecond),
		Interval: Duration(1500 * time.Millisecond),
	})
	if out.Result.Valid != checker.Invalid || len(out.Result.Violations) == 0 {
		t.Fatalf("want invalid with a violation listed, got %v\n%s", out.Result.Valid, out.Result.Summary())
	}
	// The second holder got its quorum from restarted nodes.
	v := out.Result.Violations[0]
	restarted := map[string]bool{}
	for _, e := range v.Nemesis {
		if e.F == "kill" {
			for _, n := range e.Nodes {
				restarted[n] = true
			}
		}
	}
	fresh := 0
	for _, n := range v.B.Nodes {
		if restarted[n] {
			fresh++
		}
	}
	if fresh == 0 {
		t.Errorf("the later holder's quorum %v contains none of the restarted nodes %v", v.B.Nodes, restarted)
	}
}

// A forward jump larger than the TTL on the single node expires the holder's key at once: the next
// client gets the lock while the first still holds it, and the cause names the measured jump. 8 s
// leave room for six jumps: on a loaded machine (make test beside other runs, load average about 8)
// a 5-s run had one jump in effect only from 4.4 s, and no grant came after it before the end.
func TestSingleClockJumpForwardIsInvalid(t *testing.T) {
	t.Parallel()
	out := run(t, Config{
		Lock: "single", Nemesis: "clock:jump=forward:duration=300ms", Clients: 6, Keys: 1, Seed: 1,
		TTL: Duration(time.Second), TimeLimit: Duration(8 * time.Second), Recovery: Duration(500 * time.Millisecond),
		Interval: Duration(time.Second),
	})
	if out.Result.Valid != checker.Invalid || len(out.Result.Violations) == 0 {
		t.Fatalf("want invalid with a violation listed, got %v\n%s", out.Result.Valid, out.Result.Summary())
	}
	if c := out.Result.Violations[0].Cause; !strings.Contains(c, "clock bump-forward n1 by +2s (measured +2") {
		t.Fatalf("cause %q does not name the measured jump", c)
	}
}

func TestOnFreshPortsRetriesOnlyATakenPort(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	dir := filepath.Join(t.TempDir(), "nodes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := onFreshPorts(log, "redis-masters", dir, func() error {
		calls++
		if calls < 2 {
			return systems.StartFailure("n1", "bind: Address already in use")
		}
		return nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("a taken port then a start: err %v after %d calls, want nil after 2", err, calls)
	}
	if _, err := os.Stat(dir + ".taken-1"); err != nil {
		t.Fatalf("the failed start's nodes were not set aside: %v", err)
	}
	calls = 0
	err = onFreshPorts(log, "redis-masters", "", func() error { calls++; return systems.StartFailure("n1", "bind: Address already in use") })
	if !errors.Is(err, systems.ErrPortTaken) || calls != portTries {
		t.Fatalf("always taken: err %v after %d calls, want ErrPortTaken after %d", err, calls, portTries)
	}
	calls = 0
	boom := errors.New("boom")
	if err = onFreshPorts(log, "redis-masters", "", func() error { calls++; return boom }); err != boom || calls != 1 {
		t.Fatalf("another error is not retried: err %v after %d calls", err, calls)
	}
}
