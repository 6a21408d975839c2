package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/results"
)

func short() Config {
	return Config{
		Lock: "single", Nemesis: "none", Clients: 4, Keys: 1, Seed: 2,
		TTL: Duration(500 * time.Millisecond), TimeLimit: Duration(2 * time.Second), Recovery: Duration(500 * time.Millisecond),
	}
}

func readHistory(t *testing.T, dir string) []history.Event {
	t.Helper()
	evs, err := history.ReadFile(filepath.Join(dir, history.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < 2 {
		t.Fatalf("history of %d events", len(evs))
	}
	return evs
}

// What a user types: the default, relative store. The run starts its nodes, records the run with its
// plan first and its completion last, classifies every failed acquire, and links latest.
func TestRelativeStoreRunRecordsTheRun(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	cfg := short()
	cfg.Store = "store"
	out, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Dir, filepath.Join(root, "store")+string(filepath.Separator)) {
		t.Errorf("run directory %s is not under %s/store", out.Dir, root)
	}
	if latest, err := filepath.EvalSymlinks(filepath.Join(root, "store", results.LatestLink)); err != nil || latest != out.Dir {
		t.Errorf("store/latest -> %q (%v), want %q", latest, err, out.Dir)
	}
	evs := readHistory(t, out.Dir)
	first, last := evs[0], evs[len(evs)-1]
	if first.Type != history.Invoke || first.F != history.FRun || first.Process != history.HarnessProcess || first.Plan == nil {
		t.Fatalf("first event %+v is not the run's invoke with its plan", first)
	}
	p := first.Plan
	if p.Lock != "single" || p.Workload != "mutex" || len(p.Keys) != 1 || p.Clients != 4 || p.TTL != int64(500*time.Millisecond) ||
		p.TimeLimit != int64(2*time.Second) || p.Recovery != int64(500*time.Millisecond) || p.Seed != 2 || len(p.Nemeses) != 0 {
		t.Errorf("plan %+v", p)
	}
	if last.Type != history.OK || last.F != history.FRun || last.Process != history.HarnessProcess {
		t.Fatalf("last event %+v is not the run's ok completion", last)
	}
	held := 0
	for _, e := range evs {
		if e.F == history.FAcquire && e.Type == history.Fail {
			if e.Reason != history.ReasonHeld && e.Reason != history.ReasonError {
				t.Fatalf("failed acquire without a reason: %+v", e)
			}
			if e.Reason == history.ReasonHeld {
				held++
			}
		}
	}
	if held == 0 {
		t.Error("four clients on one key never found it held: the reasons went untested")
	}
	if out.Stopped != "" || len(out.Warnings) != 0 {
		t.Errorf("stopped %q, warnings %v", out.Stopped, out.Warnings)
	}
}

// An interrupt ends the run early; the run's completion says where, and so do the results.
func TestInterruptedRunSaysHowMuchRan(t *testing.T) {
	t.Parallel()
	cfg := short()
	cfg.Store, cfg.TimeLimit = t.TempDir(), Duration(60*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(3*time.Second, cancel)
	out, err := Run(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Interrupted || !strings.HasPrefix(out.Stopped, "interrupted at ") || !strings.HasSuffix(out.Stopped, " of 1m0.5s") {
		t.Fatalf("interrupted %v, stopped %q", out.Interrupted, out.Stopped)
	}
	evs := readHistory(t, out.Dir)
	if last := evs[len(evs)-1]; last.F != history.FRun || last.Type != history.Info || last.Error != out.Stopped {
		t.Fatalf("last event %+v, want the run's info completion saying %q", last, out.Stopped)
	}
	info, err := results.ReadInfo(out.Dir)
	if err != nil || info.Stopped != out.Stopped || !info.Interrupted {
		t.Fatalf("results.json run %+v (%v)", info, err)
	}
	summary, _ := os.ReadFile(filepath.Join(out.Dir, results.SummaryFile))
	if !strings.Contains(string(summary), out.Stopped) {
		t.Errorf("summary.txt does not say where the run stopped:\n%s", summary)
	}
}

// A history that cannot be written stops the run at once: no verdict, the reason in the error, the
// nodes stopped, and latest left where it was.
func TestFailedHistoryWriteStopsTheRun(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full to fill")
	}
	cfg := short()
	cfg.Store, cfg.TimeLimit = t.TempDir(), Duration(5*time.Minute)
	began := time.Now()
	_, err := execute(context.Background(), cfg, nil, hooks{historyPath: "/dev/full"})
	if err == nil {
		t.Fatal("a run whose history cannot be written succeeded")
	}
	for _, want := range []string{"no space left on device", "--store", "stopped at"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if took := time.Since(began); took > 2*time.Minute {
		t.Errorf("the run went on for %v of its 5m plan after its history failed", took)
	}
	if _, err := os.Lstat(filepath.Join(cfg.Store, results.LatestLink)); !os.IsNotExist(err) {
		t.Errorf("store/latest exists for a run without a verdict (%v)", err)
	}
	if n := nodesUnder(cfg.Store); n != 0 {
		t.Errorf("%d redis-server processes outlived the run", n)
	}
}

// --hold-max is honoured: holds reach it even past the lease's validity, and the checker reports the
// work done past the deadline as overruns.
func TestHoldMaxPastTheValidityOverruns(t *testing.T) {
	t.Parallel()
	cfg := short()
	cfg.Store, cfg.Clients, cfg.HoldMax, cfg.TimeLimit = t.TempDir(), 2, Duration(2*time.Second), Duration(5*time.Second)
	out, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Result.OverrunCount == 0 {
		t.Fatalf("holds of up to 2s on 500ms leases: no overruns\n%s", out.Result.Summary())
	}
	var longest int64
	starts := map[int]int64{}
	for _, e := range readHistory(t, out.Dir) {
		if e.F == history.FWork && e.Type == history.Invoke {
			starts[e.Process] = e.Time
		}
		if e.F == history.FWork && e.Type == history.OK {
			longest = max(longest, e.Time-starts[e.Process])
		}
	}
	if time.Duration(longest) < 500*time.Millisecond {
		t.Errorf("longest hold %v: holds are still cut below the TTL", time.Duration(longest))
	}
}

// nodesUnder counts live redis-server processes working in a directory under root (a node's working
// directory is its own directory).
func nodesUnder(root string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cwd")
	n := 0
	for _, p := range procs {
		cwd, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(cwd, root) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if err != nil || strings.Contains(string(stat), ") Z ") || !strings.Contains(string(stat), "redis") {
			continue
		}
		n++
	}
	return n
}

// --stop-at-first ends the fault phase at the first violation the live monitor sees; the whole
// history is still checked, and the run's completion says the plan did not run whole.
func TestStopAtFirstEndsTheFaultPhase(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t)
	cfg.Lock, cfg.Clients, cfg.StopAtFirst = "mutant-single-release-del", 10, true
	cfg.TimeLimit, cfg.Recovery = Duration(60*time.Second), Duration(time.Second)
	out, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.StoppedEarly == "" || out.Result.Valid != checker.Invalid || out.Result.ViolationCount == 0 {
		t.Fatalf("stopped early %q, verdict %s with %d violations: want an early stop and an invalid verdict", out.StoppedEarly, out.Result.Valid, out.Result.ViolationCount)
	}
	if out.Stopped != "" {
		t.Fatalf("an early stop is not an interruption: %q", out.Stopped)
	}
}
