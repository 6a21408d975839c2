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

// remoteEngine is the local Engine reached over TCP on loopback (a remote Engine to lockpick), or
// skips the test saying why.
func remoteEngine(t *testing.T) *containers.Engine {
	t.Helper()
	engine(t) // skips when no local Engine answers
	fw, err := containers.Forward("/var/run/docker.sock", "127.0.0.1:0")
	if err != nil {
		t.Skipf("skipping the remote docker backend's test: %v", err)
	}
	t.Cleanup(func() { fw.Close() })
	eng, err := containers.Connect(context.Background(), fw.Host())
	if err != nil {
		t.Skipf("skipping the remote docker backend's test: %v", err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// A run on a remote Engine ended by SIGINT or SIGTERM removes its pods (two containers a node,
// the holders' clock volumes) and network itself; one killed by SIGKILL cannot, and `lockpick
// clean --docker-host` then removes them and says what it removed.
func TestDockerRemoteRunLeavesNothing(t *testing.T) {
	eng := remoteEngine(t)
	bin := build(t)
	ctx := context.Background()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			store := t.TempDir()
			cmd := exec.Command(bin, "run", "--backend", "docker", "--docker-host", eng.Host(), "--lock", "redlock", "--nodes", "3",
				"--nemesis", "pause,netcut", "--interval", "1s", "--ttl", "1s", "--time-limit", "60s", "--seed", "3", "--store", store)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			var vols []string
			deadline := time.Now().Add(60 * time.Second)
			for {
				left, err := eng.Leftovers(ctx, store)
				if err != nil {
					t.Fatal(err)
				}
				hist, _ := filepath.Glob(filepath.Join(store, "*", "*", "history.jsonl"))
				if len(left.Containers) == 6 && len(left.Networks) == 1 && len(hist) == 1 {
					if vols, err = eng.RunVolumes(ctx, store); err != nil {
						t.Fatal(err)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run did not get going within 60s (%s):\n%s", left, out.String())
				}
				time.Sleep(200 * time.Millisecond)
			}
			if len(vols) != 3 {
				t.Fatalf("the run's pods mount %d volumes (%v), want 3 (a clock volume a node)", len(vols), vols)
			}
			time.Sleep(8 * time.Second) // into the faults: pauses and cuts in effect
			cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("lockpick did not stop within 60s of %v:\n%s", sig, out.String())
			}
			left, err := eng.Leftovers(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			if sig == syscall.SIGKILL {
				if left.Empty() {
					t.Fatal("a run killed by SIGKILL left nothing behind: the clean below proves nothing")
				}
				cout, err := exec.Command(bin, "clean", "--docker-host", eng.Host(), "--keep-images").CombinedOutput()
				if err != nil {
					t.Fatalf("clean: %v\n%s", err, cout)
				}
				for _, c := range append(left.Containers, left.Networks...) {
					if !strings.Contains(string(cout), c) {
						t.Errorf("clean did not say it removed %s:\n%s", c, cout)
					}
				}
				if left, err = eng.Leftovers(ctx, store); err != nil {
					t.Fatal(err)
				}
			}
			if !left.Empty() {
				t.Fatalf("after %v: left behind %s\n%s", sig, left, out.String())
			}
			for _, v := range vols {
				if ok, err := eng.VolumeExists(ctx, v); err != nil || ok {
					t.Errorf("after %v: the clock volume %s is still there (%v)", sig, v, err)
				}
			}
		})
	}
}
