package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/scenarios"
)

// binDir holds the lockpick that build compiles, shared by the package's tests; TestMain removes it.
var binDir string

var built struct {
	once sync.Once
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lockpick-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles lockpick once per test binary run (a link takes seconds on a loaded machine; every
// test runs the same program) and returns its path. Nothing the tests run writes beside it.
func build(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		bin := filepath.Join(binDir, "lockpick")
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("build: %v\n%s", err, out)
			return
		}
		built.bin = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// Bad input: one line that names the fix, exit 255, never a panic trace.
func TestBadInputExits255WithOneLine(t *testing.T) {
	t.Parallel()
	bin := build(t)
	store := t.TempDir()
	cases := [][]string{
		{"run", "--lock", "zookeeper", "--store", store},
		{"run", "--nemesis", "meteor", "--store", store},
		{"run", "--ttl", "0s", "--store", store},
		{"run", "--ttl", "5s", "--time-limit", "2s", "--store", store},
		{"run", "--ttl", "banana", "--store", store},
		{"run", "--store", "/proc/version/store"},
		{"check", t.TempDir()},
		{"run", "testdata/bad-field.yaml", "--store", store},
		{"run", "../../scenarios/single-none.yaml", "--lock", "redlock", "--store", store},
		{"run", "--nemesis", "restart:speed=9", "--store", store},
		{"scenario", "nope"},
		{"matrix", "--locks", "single,zookeeper", "--store", store},
		{"matrix", "--nemeses", "clock:target=nowhere", "--store", store},
		{"run", "--lock", "etcd", "--nemesis", "clock", "--store", store},
		{"run", "--lock", "etcd", "--nodes", "10", "--store", store},
		{"run", "--backend", "docker", "--docker-host", "tcp://127.0.0.1:1", "--lock", "etcd", "--nemesis", "latency:paths=peers:delay=1ms", "--store", store},
		{"run", "--backend", "nowhere", "--store", store},
		{"run", "--endpoints", "127.0.0.1:6379", "--store", store},
		{"run", "--backend", "external", "--endpoints", "127.0.0.1:6379", "--lock", "single", "--nemesis", "restart", "--store", store},
		{"run", "--nemesis", "netcut", "--store", store},
		{"run", "--lock", "etcd", "--etcd-server", "/nonexistent/etcd", "--store", store},
		{"run", "--lock", "redlock", "--etcd-server", "current", "--store", store},
		{"run", "--lock", "etcd", "--nemesis", "partition:target=primary", "--store", store},
		{"run", "--docker-publish-host", "10.0.0.5", "--store", store},
		{"run", "--backend", "docker", "--docker-publish-host", "10.0.0.5", "--store", store},
		{"run", "--backend", "docker", "--docker-host", "tcp://127.0.0.1:1", "--store", store},
		{"run", "--backend", "ssh", "--store", store},
		{"run", "--hosts", "10.0.0.5", "--store", store},
		{"run", "--backend", "ssh", "--hosts", "10.0.0.5", "--ssh-key", "/nonexistent/key", "--store", store},
		{"run", "--backend", "ssh", "--hosts", "10.0.0.5,10.0.0.6", "--ssh-key", "main_test.go", "--ssh-fingerprint", "SHA256:x", "--store", store},
		{"run", "--backend", "ssh", "--hosts", "10.0.0.5", "--ssh-key", "main_test.go", "--lock", "etcd", "--nemesis", "partition:paths=peers", "--store", store},
		{"run", "--backend", "ssh", "--hosts", "10.0.0.5", "--ssh-key", "main_test.go", "--nemesis", "latency:paths=peers", "--store", store},
		{"clean", "--backend", "ssh"},
	}
	for _, args := range cases {
		var stderr bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		if code := exitCode(err); code != 255 {
			t.Errorf("%v: exit %d, want 255 (stderr %q)", args, code, stderr.String())
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" || strings.Contains(msg, "\n") || strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine") {
			t.Errorf("%v: want a one-line error, got %q", args, msg)
		}
	}
}

// SIGINT in the middle of a run: no redis-server left, the history on disk, and check works on it.
func TestInterruptLeavesNoNodesAndACheckableHistory(t *testing.T) {
	t.Parallel()
	bin := build(t)
	store := t.TempDir()
	cmd := exec.Command(bin, "run", "--lock", "redlock", "--nemesis", "restart", "--interval", "1s",
		"--ttl", "1s", "--time-limit", "5m", "--seed", "9", "--store", store)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	// Let the run get going: nodes up and history being written (on a loaded machine, starting five
	// nodes and the clients takes a while: the wait ends as soon as the history grows).
	deadline := time.Now().Add(2 * time.Minute)
	var hist string
	for time.Now().Before(deadline) {
		matches, _ := filepath.Glob(filepath.Join(store, "*", "*", "history.jsonl"))
		if len(matches) == 1 {
			if fi, err := os.Stat(matches[0]); err == nil && fi.Size() > 10000 {
				hist = matches[0]
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if hist == "" {
		cmd.Process.Kill()
		t.Fatalf("no history appeared:\n%s", out.String())
	}
	time.Sleep(2 * time.Second)
	if n := nodesUnder(store); n == 0 {
		t.Fatal("found no redis-server of the run while it was running: the orphan check would prove nothing")
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("lockpick did not stop within 30s of SIGINT:\n%s", out.String())
	}
	if code := exitCode(err); code < 0 || code > 2 {
		t.Fatalf("exit %d after SIGINT, want a verdict (0, 1 or 2):\n%s", code, out.String())
	}
	if n := nodesUnder(store); n != 0 {
		t.Fatalf("%d redis-server processes outlived the run", n)
	}
	dir := filepath.Dir(hist)
	var doc struct {
		Run struct {
			Interrupted bool `json:"interrupted"`
		} `json:"run"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &doc)
	if !doc.Run.Interrupted {
		t.Error("results.json does not say the run was interrupted")
	}
	check := exec.Command(bin, "check", dir)
	cout, err := check.CombinedOutput()
	if code := exitCode(err); code < 0 || code > 2 {
		t.Fatalf("check exited %d:\n%s", code, cout)
	}
	if !strings.Contains(string(cout), "verdict") {
		t.Fatalf("check printed no verdict:\n%s", cout)
	}
}

// nodesUnder counts live redis-server processes working in a directory under root. Redis rewrites
// its command line, so the node is found by its working directory, which lockpick sets to the
// node's own directory.
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

// A scenario file runs end to end, and its exit code says whether the expectation was met.
func TestRunScenarioFileAndMatrix(t *testing.T) {
	t.Parallel()
	bin := build(t)
	store := t.TempDir()
	file := filepath.Join(t.TempDir(), "s.yaml")
	write := func(expect string) {
		text := "name: s\nwhy: test\nlock: single\nclients: 3\nttl: 500ms\ntime_limit: 2s\nrecovery: 200ms\nseed: 3\nnemeses: [none]\nexpect: " + expect + "\n"
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("valid")
	out, err := exec.Command(bin, "run", file, "--store", store).CombinedOutput()
	if code := exitCode(err); code != 0 || !strings.Contains(string(out), "expected valid: met") {
		t.Fatalf("met expectation: exit %d\n%s", code, out)
	}
	write("invalid")
	out, err = exec.Command(bin, "run", file, "--store", store, "--seed", "4").CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "NOT MET: verdict valid, expected invalid") {
		t.Fatalf("missed expectation: exit %d\n%s", code, out)
	}
	var cfg struct {
		Seed uint64 `json:"seed"`
	}
	data, err := os.ReadFile(filepath.Join(store, "latest", "config.json"))
	if err != nil || json.Unmarshal(data, &cfg) != nil || cfg.Seed != 4 {
		t.Errorf("--seed did not override the file's seed: %s %v", data, err)
	}

	out, err = exec.Command(bin, "matrix", "--locks", "single", "--nemeses", "none", "--seeds", "1,2", "--ttl", "500ms",
		"--time-limit", "1s", "--recovery", "200ms", "--clients", "3", "--store", store).CombinedOutput()
	if exitCode(err) != 0 {
		t.Fatalf("matrix: %v\n%s", err, out)
	}
	cards, _ := filepath.Glob(filepath.Join(store, "matrix", "*", "report.json"))
	if len(cards) != 1 {
		t.Fatalf("report cards: %v\n%s", cards, out)
	}
	var card struct {
		Cells []struct {
			Lock, Nemesis string
			Runs          []struct {
				Seed    uint64
				Verdict string
			}
		}
	}
	data, _ = os.ReadFile(cards[0])
	if err := json.Unmarshal(data, &card); err != nil || len(card.Cells) != 1 || len(card.Cells[0].Runs) != 2 || card.Cells[0].Runs[1].Seed != 2 || card.Cells[0].Runs[0].Verdict != "valid" {
		t.Errorf("report card %s: %v", data, err)
	}
	if md, err := os.ReadFile(filepath.Join(filepath.Dir(cards[0]), "report.md")); err != nil || !strings.Contains(string(md), "| single | `none` | 2/2 valid |") {
		t.Errorf("report.md: %s %v", md, err)
	}
}

// A matrix cell takes the expectation of the scenarios it agrees with, and none when they disagree.
func TestMatrixExpectations(t *testing.T) {
	cases := []struct{ lock, nem, want string }{
		{"redlock", "restart", "invalid"},
		{"redlock", "partition:kind=client-majority", "valid"},
		{"single", "clock:jump=forward:target=majority", "invalid"},
		{"redlock", "clock", ""}, // the forward and back scenarios disagree
	}
	all, err := scenarios.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if got := expectedFor(all, c.lock, c.nem, "none"); got != c.want {
			t.Errorf("%s %s: expected %q, want %q", c.lock, c.nem, got, c.want)
		}
	}
	if got := expectedFor(all, "redlock", "restart", "aof-always"); got != "valid" {
		t.Errorf("redlock restart with aof-always: %q, want valid", got)
	}
}
