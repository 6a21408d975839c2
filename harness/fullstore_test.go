package harness

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lockpick-dev/lockpick/results"
)

// tinyStore mounts a tmpfs of size bytes at a new directory, unmounted when the test ends; it skips
// the test where it cannot (a mount needs root).
func tinyStore(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a full file system needs a tmpfs mount, and mounting needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes zeros under dir until its file system is full, then gives back keep bytes.
func fill(t *testing.T, dir string, keep int64) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zeros := make([]byte, 64<<10)
	for {
		if _, err := f.Write(zeros); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	size, _ := f.Seek(0, io.SeekEnd)
	if err := f.Truncate(max(size-keep, 0)); err != nil {
		t.Fatal(err)
	}
}

// A store that fills up once the run is checked: the verdict is said before any file is written,
// results.json (small) is written and store/latest follows it, and summary.txt and the report that
// no longer fit are the outcome's Unwritten, each with its fix, not an error that hides the verdict.
func TestFullStoreAtSummaryKeepsTheVerdict(t *testing.T) {
	t.Parallel()
	cfg := short()
	cfg.Store = tinyStore(t, "64m")
	var said *Outcome
	hk := hooks{
		verdict: func(o *Outcome) {
			if _, err := os.Stat(filepath.Join(o.Dir, results.ResultsFile)); err == nil {
				t.Error("results.json was written before the verdict was said")
			}
			said = o
		},
		// One page: results.json (a few kB) fits, summary.txt after it does not.
		beforeWrite: func(string) { fill(t, cfg.Store, 4<<10) },
	}
	out, err := execute(context.Background(), cfg, nil, hk)
	if err != nil {
		t.Fatalf("a run whose summary does not fit failed: %v", err)
	}
	if said == nil || said.Result == nil || said != out {
		t.Fatal("the verdict was not said before the files were written")
	}
	if _, err := results.ReadInfo(out.Dir); err != nil {
		t.Errorf("results.json, which fits, was not written: %v", err)
	}
	if latest, err := filepath.EvalSymlinks(filepath.Join(cfg.Store, results.LatestLink)); err != nil || latest != out.Dir {
		t.Errorf("store/latest -> %q (%v), want the run with its results.json", latest, err)
	}
	text := strings.Join(out.Unwritten, "\n")
	for _, want := range []string{results.SummaryFile, "no space left on device", "free space under the store or choose another --store"} {
		if !strings.Contains(text, want) {
			t.Errorf("unwritten %q lacks %q", text, want)
		}
	}
	rec, _ := os.Stat(filepath.Join(out.Dir, results.ResultsFile))
	t.Logf("results.json %d bytes; unwritten:\n%s", rec.Size(), text)
}

// A store full before results.json: the verdict is said all the same, every file is a warning, and
// store/latest does not move to a run that has no record.
func TestFullStoreBeforeResultsKeepsTheVerdict(t *testing.T) {
	t.Parallel()
	cfg := short()
	cfg.Store = tinyStore(t, "64m")
	said := false
	out, err := execute(context.Background(), cfg, nil, hooks{
		verdict:     func(*Outcome) { said = true },
		beforeWrite: func(string) { fill(t, cfg.Store, 0) },
	})
	if err != nil || !said {
		t.Fatalf("said %v, error %v", said, err)
	}
	if !strings.Contains(strings.Join(out.Unwritten, "\n"), results.ResultsFile) {
		t.Errorf("unwritten %q does not name results.json", out.Unwritten)
	}
	if _, err := os.Lstat(filepath.Join(cfg.Store, results.LatestLink)); !os.IsNotExist(err) {
		t.Errorf("store/latest points at a run without results.json (%v)", err)
	}
}
