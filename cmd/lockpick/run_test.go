package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Silent coercions are refused: one line that names the fix, exit 255, nothing run.
func TestRefusalsNameTheFix(t *testing.T) {
	t.Parallel()
	bin := build(t)
	store := t.TempDir()
	dir := t.TempDir()
	scenario := func(name, extra string) string {
		p := filepath.Join(dir, name+".yaml")
		text := "name: s\nwhy: test\nlock: single\nclients: 3\nttl: 500ms\ntime_limit: 2s\n" + extra + "expect: valid\n"
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--nodes", "0"}, "--nodes 0: give a positive value"},
		{[]string{"run", "--interval", "0s"}, "--interval 0s: give a positive value"},
		{[]string{"run", "--client-groups", "0"}, "--client-groups 0"},
		{[]string{"run", "--check-timeout", "-1s"}, "--check-timeout must be positive"},
		{[]string{"run", "--check-timeout", "0s"}, "--check-timeout 0s"},
		{[]string{"run", "--lock", "single", "--nodes", "3"}, "--lock single uses one node"},
		{[]string{"run", "--lock", "redlock", "--nodes", "4"}, "--allow-even-nodes"},
		{[]string{"run", "--lock", "redlock", "--nodes", "2"}, "use --nodes 3"},
		{[]string{"run", "--name", "../x"}, "not a plain name"},
		{[]string{"run", "--name", "latest"}, "taken by the store itself"},
		{[]string{"run", "--clients", "5000"}, "between 1 and 1000"},
		{[]string{"run", "--workload", "counter", "--hold-max", "1s"}, "--hold-max applies to the mutex workload"},
		{[]string{"matrix", "--interval", "0s"}, "--interval 0s"},
		{[]string{"matrix", "--nodes", "0"}, "--nodes 0: give a positive value"},
		{[]string{"matrix", "--locks", "single", "--nodes", "3"}, "--lock single uses one node"},
		{[]string{"matrix", "--node-timeout", "5s"}, "--node-timeout 5s must be positive and well below --ttl"},
		{[]string{"matrix", "--workload", "counter", "--extend", "--locks", "watchdog"}, "--extend: --lock watchdog cannot renew a lease on request"},
		{[]string{"run", "--extend", "--careful"}, "--extend and --careful together"},
		{[]string{"run", "--seeds", "1,x"}, `"x" is not a seed`},
		{[]string{"run", "--seeds", "1,1"}, "seed 1 is given twice"},
		{[]string{"run", "--seeds", "1,2", "--seed", "3"}, "--seed and --seeds together"},
		{[]string{"selftest", "--seeds", "0"}, "--seeds must be at least 1"},
		{[]string{"run", scenario("s", "nodes: 0\n")}, "nodes: must be at least 1"},
		{[]string{"run", scenario("other", "")}, `name "s" differs from the file name`},
		{[]string{"run", "--lock", "redlock", "--nemesis", "pause", "--backend", "external", "--endpoints", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"}, "--nemesis pause pauses a server's process (node signals), and --backend external servers are someone else's: use --backend local or docker or ssh, or client-side faults"},
		{[]string{"run", "--lock", "redlock", "--nemesis", "latency:paths=peers", "--dry-run"}, "drop paths=peers"},
	}
	for _, c := range cases {
		args := append(c.args, "--store", store)
		var stderr bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		msg := strings.TrimSpace(stderr.String())
		if code := exitCode(err); code != 255 {
			t.Errorf("%v: exit %d, want 255 (%q)", c.args, code, msg)
		}
		if !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%v: want one line containing %q, got %q", c.args, c.want, msg)
		}
	}
	if entries, _ := os.ReadDir(store); len(entries) != 0 {
		t.Errorf("refused runs left %d entries in the store", len(entries))
	}
}

// --nemesis help describes every nemesis from its kind: parameters, defaults and needs.
func TestNemesisHelp(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(build(t), "run", "--nemesis", "help").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nnetcut: cuts a server's own network interface (needs network cuts)", "paths=peers needs peer cuts", "delay=DURATION  how long a killed node stays down (default --restart-delay)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--nemesis help lacks %q", want)
		}
	}
}

// What the README tells a newcomer to type, in a fresh directory: the default relative store, then
// check store/latest.
func TestFirstRunWithTheDefaultStore(t *testing.T) {
	t.Parallel()
	bin := build(t)
	work := t.TempDir()
	cmd := exec.Command(bin, "run", "--lock", "single", "--nemesis", "restart", "--interval", "1s", "--ttl", "500ms", "--time-limit", "3s", "--recovery", "500ms", "--seed", "3")
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	if code := exitCode(err); code < 0 || code > 2 {
		t.Fatalf("run exited %d:\n%s", code, out)
	}
	check := exec.Command(bin, "check", "store/latest")
	check.Dir = work
	cout, err := check.CombinedOutput()
	if code := exitCode(err); code < 0 || code > 2 || !strings.Contains(string(cout), "verdict") {
		t.Fatalf("check store/latest exited %d:\n%s", code, cout)
	}
}

// SIGTERM (a cancelled CI job) with no violation never exits 0, and says how much of the plan ran.
func TestTerminatedRunNeverPasses(t *testing.T) {
	t.Parallel()
	bin := build(t)
	store := t.TempDir()
	cmd := exec.Command(bin, "run", "--lock", "redlock", "--ttl", "1s", "--time-limit", "60s", "--seed", "9", "--store", store)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(filepath.Join(store, "*", "*", "history.jsonl")); len(m) == 1 {
			if fi, err := os.Stat(m[0]); err == nil && fi.Size() > 5000 {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("lockpick did not stop within 60s of SIGTERM:\n%s", out.String())
	}
	if code := exitCode(err); code != 1 && code != 2 {
		t.Fatalf("exit %d after SIGTERM, want 1 (invalid) or 2 (unknown):\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "cut short: interrupted at ") || !strings.Contains(out.String(), " of 1m5s") {
		t.Fatalf("the output does not say how much of the plan ran:\n%s", out.String())
	}
}

// A scenario file without a seed runs with a random one and prints it, so the run can be repeated.
func TestScenarioWithoutSeedPrintsIt(t *testing.T) {
	t.Parallel()
	bin := build(t)
	file := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(file, []byte("name: s\nwhy: test\nlock: single\nclients: 3\nttl: 500ms\ntime_limit: 1s\nrecovery: 200ms\nexpect: valid\n"), 0o644)
	out, _ := exec.Command(bin, "run", file, "--store", t.TempDir()).CombinedOutput()
	if !strings.Contains(string(out), "drawn at random: the file gives none; rerun it with --seed ") {
		t.Fatalf("no random seed printed:\n%s", out)
	}
}
