package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/containers"
)

// engine connects to the local Docker Engine, or skips the test saying why.
func engine(t *testing.T) *containers.Engine {
	t.Helper()
	eng, err := containers.Connect(context.Background(), "")
	if err != nil {
		t.Skipf("skipping the docker backend's test: %v", err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// A docker run ended by SIGINT or SIGTERM removes its containers and network itself; one killed by
// SIGKILL cannot, and `lockpick clean` then removes them and says what it removed.
func TestDockerRunLeavesNothing(t *testing.T) {
	eng := engine(t)
	bin := build(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			store := t.TempDir()
			cmd := exec.Command(bin, "run", "--backend", "docker", "--lock", "redlock", "--nodes", "3", "--nemesis", "pause",
				"--interval", "1s", "--ttl", "1s", "--time-limit", "60s", "--seed", "3", "--store", store)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			// The run is going once its history grows and its three containers are there.
			deadline := time.Now().Add(60 * time.Second)
			for {
				left, err := eng.Leftovers(context.Background(), store)
				if err != nil {
					t.Fatal(err)
				}
				hist, _ := filepath.Glob(filepath.Join(store, "*", "*", "history.jsonl"))
				if len(left.Containers) == 3 && len(left.Networks) == 1 && len(hist) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run did not get going within 60s (%s):\n%s", left, out.String())
				}
				time.Sleep(200 * time.Millisecond)
			}
			time.Sleep(3 * time.Second)
			cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("lockpick did not stop within 60s of %v:\n%s", sig, out.String())
			}
			left, err := eng.Leftovers(context.Background(), store)
			if err != nil {
				t.Fatal(err)
			}
			if sig == syscall.SIGKILL {
				if left.Empty() {
					t.Fatal("a run killed by SIGKILL left nothing behind: the clean below proves nothing")
				}
				// A dry run names what the clean then removes, and removes nothing.
				dout, err := exec.Command(bin, "clean", "--keep-images", "--dry-run").CombinedOutput()
				if err != nil {
					t.Fatalf("clean --dry-run: %v\n%s", err, dout)
				}
				for _, c := range append(left.Containers, left.Networks...) {
					if !strings.Contains(string(dout), c) {
						t.Errorf("clean --dry-run did not name %s:\n%s", c, dout)
					}
				}
				if still, err := eng.Leftovers(context.Background(), store); err != nil || len(still.Containers) != len(left.Containers) {
					t.Fatalf("clean --dry-run removed something: before %s, after %s (%v)", left, still, err)
				}
				cout, err := exec.Command(bin, "clean", "--keep-images").CombinedOutput()
				if err != nil {
					t.Fatalf("clean: %v\n%s", err, cout)
				}
				for _, c := range append(left.Containers, left.Networks...) {
					if !strings.Contains(string(cout), c) {
						t.Errorf("clean did not say it removed container %s:\n%s", c, cout)
					}
				}
				if left, err = eng.Leftovers(context.Background(), store); err != nil {
					t.Fatal(err)
				}
			}
			if !left.Empty() {
				t.Fatalf("after %v: left behind %s\n%s", sig, left, out.String())
			}
		})
	}
}
