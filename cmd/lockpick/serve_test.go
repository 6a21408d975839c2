package main

import (
	"bufio"
	"encoding/xml"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/results"
)

// serve listens on loopback, shows the store, and stops cleanly on Ctrl-C.
func TestServeUntilInterrupted(t *testing.T) {
	t.Parallel()
	bin := build(t)
	store := t.TempDir()
	cmd := exec.Command(bin, "serve", "--store", store, "--addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed no address: %v", err)
	}
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`).FindString(line)
	if url == "" {
		t.Fatalf("serve is not on loopback: %q", line)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "0 runs") {
		t.Fatalf("index: %d %q", resp.StatusCode, body)
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if code := exitCode(err); code != 0 {
			t.Fatalf("serve exited %d after Ctrl-C, want 0", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after Ctrl-C")
	}
}

// A run with --junit writes one test case; a run that cannot start writes an error case and
// still exits 255.
func TestRunWritesJUnit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("needs redis-server")
	}
	bin := build(t)
	store := t.TempDir()
	file := filepath.Join(t.TempDir(), "junit.xml")
	out, err := exec.Command(bin, "run", "--lock", "single", "--time-limit", "2s", "--recovery", "1s", "--ttl", "1s",
		"--seed", "1", "--store", store, "--junit", file).CombinedOutput()
	if code := exitCode(err); code != 0 {
		t.Fatalf("run exited %d: %s", code, out)
	}
	suite := readJUnit(t, file)
	if suite.Tests != 1 || suite.Failures != 0 || suite.Errors != 0 || !strings.Contains(suite.Cases[0].Name, "single under none, seed 1") {
		t.Fatalf("junit of a valid run: %+v", suite)
	}
	if !strings.Contains(string(out), results.ReportFile) {
		t.Errorf("run does not name report.html: %s", out)
	}

	out, err = exec.Command(bin, "run", "--lock", "single", "--redis-server", "/nonexistent/redis-server", "--time-limit", "2s", "--ttl", "1s",
		"--store", store, "--junit", file).CombinedOutput()
	if code := exitCode(err); code != 255 {
		t.Fatalf("run without redis exited %d, want 255: %s", code, out)
	}
	if suite := readJUnit(t, file); suite.Errors != 1 {
		t.Fatalf("junit of a run that could not start: %+v", suite)
	}
}

func readJUnit(t *testing.T, file string) results.JUnitSuite {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var s results.JUnitSuite
	if err := xml.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s is not XML: %v", file, err)
	}
	return s
}
