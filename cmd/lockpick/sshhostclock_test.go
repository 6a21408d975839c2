package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockpick-dev/lockpick/systems"
)

// hostClockEnv must be set for TestHostClockOverSSH, which moves this machine's clock: namespace
// hosts share its kernel. make test-long sets it and runs the test alone, after the other tests.
const hostClockEnv = "LOCKPICK_HOST_CLOCK_TEST"

// hostClockSet is the ssh-hosts.sh set of the test, apart from the sets 0 and 1 of other runs.
const hostClockSet = 2

// wallMinusMonotonic is CLOCK_REALTIME minus CLOCK_MONOTONIC: what a step of the wall clock moves,
// and nothing else does (no time daemon runs while the test does: the run refuses one).
func wallMinusMonotonic(t *testing.T) time.Duration {
	t.Helper()
	var rt, mono unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		t.Fatal(err)
	}
	if err := unix.ClockGettime(unix.CLOCK_REALTIME, &rt); err != nil {
		t.Fatal(err)
	}
	return time.Duration(rt.Nano() - mono.Nano())
}

// The host clock over SSH, on namespace hosts that share this machine's kernel: refused without
// --allow-host-clock, and without =shared; with it a run's jumps forward of 1.5s are in the
// history, break the single lock (Redis expires keys by its wall clock: with a 1s TTL every jump
// expires the live lease at once, where a 2s TTL leaves it to whether the lease is older than 0.5s
// at the jump, which seed 1 missed in three jumps once), and the clock is back
// within 50ms after the run. A run killed with SIGKILL in the middle of a jump leaves the clock
// moved, and lockpick clean puts it back, saying so.
func TestHostClockOverSSH(t *testing.T) {
	if os.Getenv(hostClockEnv) != "1" {
		t.Skipf("skipping: it moves this machine's clock by 1.5s, twice: set %s=1 (make test-long does, after the other tests)", hostClockEnv)
	}
	hosts := upSSHHostSet(t, 1, hostClockSet)
	bin := build(t)
	base := wallMinusMonotonic(t)
	t.Cleanup(func() { restoreAfterTest(t, bin, hosts, base) })
	run := func(extra ...string) []string {
		return append(append([]string{"run", "--backend", "ssh", "--lock", "single", "--nemesis", "clock:source=host:jump=forward:offset=1500ms",
			"--ttl", "1s", "--interval", "2s", "--recovery", "5s", "--seed", "1"}, hosts.flags()...), extra...)
	}
	refusals := map[string][]string{
		"--allow-host-clock":        run("--time-limit", "10s", "--store", t.TempDir()),
		"--allow-host-clock=shared": run("--time-limit", "10s", "--store", t.TempDir(), "--allow-host-clock"),
	}
	for want, args := range refusals {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if exitCode(err) == 0 || !bytes.Contains(out, []byte(want)) {
			t.Errorf("lockpick %s: exit %d, want a refusal naming %s:\n%s", strings.Join(args, " "), exitCode(err), want, out)
		}
	}
	store := t.TempDir()
	args := run("--time-limit", "10s", "--store", store, "--allow-host-clock=shared")
	out, err := exec.Command(bin, args...).CombinedOutput()
	if code := exitCode(err); code != 1 || !bytes.Contains(out, []byte("verdict: INVALID")) {
		t.Errorf("lockpick %s: exit %d, want the single lock judged invalid:\n%s", strings.Join(args, " "), code, out)
	}
	if off := wallMinusMonotonic(t) - base; off.Abs() > 50*time.Millisecond {
		t.Errorf("after the run the clock is %v off", off)
	}
	if n := hostJumps(t, store); n == 0 {
		t.Errorf("no bump-forward of +1.5s in the history:\n%s", out)
	}
	killMidJump(t, bin, hosts, base, run("--time-limit", "60s", "--store", t.TempDir(), "--allow-host-clock=shared"))
}

// killMidJump starts a run, kills it with SIGKILL while the clock is ahead, and checks that lockpick
// clean puts the clock back and says so.
func killMidJump(t *testing.T, bin string, hosts sshHosts, base time.Duration, args []string) {
	t.Helper()
	cmd, out := startLockpick(t, bin, args)
	deadline := time.Now().Add(60 * time.Second)
	for wallMinusMonotonic(t)-base < time.Second {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no jump within 60s:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if off := wallMinusMonotonic(t) - base; off < time.Second {
		t.Fatalf("killed mid-jump, the clock is %v off: the run was not killed in the jump", off)
	}
	cleanOut := cleanHosts(t, bin, hosts)
	if !bytes.Contains(cleanOut, []byte("host clocks")) || !bytes.Contains(cleanOut, []byte("clock stepped by -1.5")) {
		t.Errorf("lockpick clean does not say it restored the clock:\n%s", cleanOut)
	}
	if off := wallMinusMonotonic(t) - base; off.Abs() > 50*time.Millisecond {
		t.Errorf("after lockpick clean the clock is %v off:\n%s", off, cleanOut)
	}
}

// hostJumps counts the completed jumps in the run's history whose offset is +1.5s.
func hostJumps(t *testing.T, store string) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(store, "*", "*", "history.jsonl"))
	if len(files) != 1 {
		t.Fatalf("histories in the store: %v", files)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			F       string           `json:"f"`
			Type    string           `json:"type"`
			Offsets map[string]int64 `json:"offsets"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.F == "bump-forward" && ev.Type != "invoke" &&
			math.Abs(float64(ev.Offsets["n1"])-1.5e9) < 1e6 {
			n++
		}
	}
	return n
}

// restoreAfterTest puts the clock back should the test have failed with it moved: lockpick clean
// from the record, whatever it is.
func restoreAfterTest(t *testing.T, bin string, hosts sshHosts, base time.Duration) {
	if off := wallMinusMonotonic(t) - base; off.Abs() > 50*time.Millisecond {
		out, err := exec.Command(bin, append([]string{"clean", "--backend", "ssh"}, hosts.flags()...)...).CombinedOutput()
		t.Errorf("the clock was %v off at the end; lockpick clean: %v\n%s", off, err, out)
	}
	left, err := systems.SurveySSH(t.Context(), hosts.config(""))
	if err == nil && total(left) > 0 {
		t.Errorf("left on the hosts: %v", left)
	}
}
