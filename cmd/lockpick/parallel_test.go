package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// eachAtOnce runs every call, never more than parallel at once, and stops feeding at an error.
func TestEachAtOnce(t *testing.T) {
	var running, most, calls atomic.Int32
	var mu sync.Mutex
	seen := map[int]bool{}
	err := eachAtOnce(20, 3, func(i int) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		calls.Add(1)
		mu.Lock()
		seen[i] = true
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		return nil
	})
	if err != nil || len(seen) != 20 || calls.Load() != 20 || most.Load() > 3 || most.Load() < 2 {
		t.Fatalf("err %v, %d distinct calls of %d, at most %d at once", err, len(seen), calls.Load(), most.Load())
	}
	boom := errors.New("boom")
	calls.Store(0)
	err = eachAtOnce(100, 2, func(i int) error {
		calls.Add(1)
		if i == 3 {
			return boom
		}
		time.Sleep(time.Millisecond)
		return nil
	})
	if !errors.Is(err, boom) || calls.Load() > 10 {
		t.Fatalf("after an error: err %v, %d calls", err, calls.Load())
	}
}

// `scenario --parallel 2` runs two files side by side; each report is printed whole, and the tally
// names the one not met.
func TestScenarioParallel(t *testing.T) {
	t.Parallel()
	bin := build(t)
	dir, store := t.TempDir(), t.TempDir()
	var files []string
	for _, s := range []struct{ name, expect string }{{"met", "valid"}, {"missed", "invalid"}} {
		f := filepath.Join(dir, s.name+".yaml")
		text := "name: " + s.name + "\nwhy: test\nlock: single\nclients: 3\nttl: 500ms\ntime_limit: 2s\nrecovery: 200ms\nseed: 3\nnemeses: [none]\nexpect: " + s.expect + "\n"
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	out, err := exec.Command(bin, append([]string{"scenario", "--parallel", "2", "--store", store}, files...)...).CombinedOutput()
	text := string(out)
	if code := exitCode(err); code != 1 || !strings.Contains(text, "2 scenarios in") || !strings.Contains(text, "1 met, 1 not met missed") {
		t.Fatalf("exit %d\n%s", code, text)
	}
	// Each report is whole: its header comes right before its own verdict line, with no other header between.
	for _, name := range []string{"met", "missed"} {
		head := strings.Index(text, "== "+name+": test")
		end := strings.Index(text, "== "+name+": expected")
		if head < 0 || end < head || strings.Contains(text[head+1:end], "\n== ") {
			t.Errorf("report of %s is not whole:\n%s", name, text)
		}
	}
}

// eachWeighted never runs more weight at once than the slots, runs every call, and gives a call
// heavier than every slot all of them.
func TestEachWeighted(t *testing.T) {
	var mu sync.Mutex
	load, most, next := 0, 0, 0
	weights := []int{2, 1, 1, 2, 5, 1, 2, 1, 1, 1}
	err := eachWeighted(len(weights), 3, func(i int) int { return weights[i] }, func(i int) error {
		w := min(weights[i], 3)
		mu.Lock()
		next++
		load += w
		most = max(most, load)
		mu.Unlock()
		time.Sleep(3 * time.Millisecond)
		mu.Lock()
		load -= w
		mu.Unlock()
		return nil
	})
	if err != nil || next != len(weights) || most > 3 || most < 3 {
		t.Fatalf("err %v, %d calls, at most %d slots busy at once (want 3)", err, next, most)
	}
}
