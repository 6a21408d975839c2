package harness

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
)

// A client program that breaks the protocol stops the run with one line that names it, and none of
// the programs the run started outlives it.
func TestBrokenClientStopsTheRun(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"unknown-id", "garbage", "exit-at-once"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			mark := t.TempDir() // an argument only this test's programs carry
			cfg := baseConfig(t)
			// A plan far longer than the bound below, so that a loaded machine's slow starts do not
			// pass for a run that went on.
			cfg.Lock, cfg.TimeLimit = "client", Duration(2*time.Minute)
			cfg.ClientCmd = []string{"/usr/bin/python3", "../locks/testdata/badclient.py", mode, mark}
			began := time.Now()
			_, err := Run(context.Background(), cfg, nil)
			if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "(python3 badclient.py "+mode) {
				t.Fatalf("run: %v; want one line naming the client", err)
			}
			if d := time.Since(began); d > 30*time.Second {
				t.Errorf("the run took %v to stop", d)
			}
			if pids := running(mark); len(pids) > 0 {
				t.Fatalf("client programs outlived the run: %v", pids)
			}
		})
	}
}

// running lists the processes whose command line contains mark.
func running(mark string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), mark) {
			out = append(out, d.Name())
		}
	}
	return out
}

// A client program slow to start (an interpreter loading its library on a loaded machine) does not
// eat the planned time: the run's clock starts once every client is open, so a run that would
// otherwise have ended before its first acquire works its whole time and is judged on it.
func TestSlowClientStartDoesNotEatThePlannedTime(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t)
	cfg.Lock, cfg.TimeLimit, cfg.Recovery = "client", Duration(2*time.Second), Duration(time.Second)
	cfg.ClientCmd = []string{"/bin/sh", "-c", "sleep 4; exec /usr/bin/python3 ../clients/python/redis_lock.py"}
	began := time.Now()
	out, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 7*time.Second {
		t.Errorf("the run took %v: its planned 3s should have begun after the clients' 4s start", took)
	}
	if out.Result.Valid != checker.Valid || out.Result.Stats.Acquires.OK == 0 {
		t.Fatalf("verdict %v with %d ok acquires (%s); want valid with grants", out.Result.Valid, out.Result.Stats.Acquires.OK, out.Result.UnknownReason)
	}
}
