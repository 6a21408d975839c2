package results

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
)

// A run checked while its history is written (FollowRun) gets the verdict and the report that
// `lockpick check DIR` (CheckRun) gives afterwards, whatever the chunks the writer wrote, lines cut
// in two included.
func TestFollowRunMatchesCheckRun(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	for _, c := range []struct {
		name   string
		events []history.Event
	}{
		{"violation", (&synth{clients: 10, duration: 20000 * ms, violation: true}).build()},
		{"retiring processes", (&synth{clients: 10, duration: 8000 * ms, retire: true}).build()},
		{"generated, two keys", checker.Generate(3, 30000, 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var hist bytes.Buffer
			enc := json.NewEncoder(&hist)
			for _, e := range c.events {
				if err := enc.Encode(e); err != nil {
					t.Fatal(err)
				}
			}
			dir, path := followedRunDir(t)
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			fl, err := FollowRun(dir, path, checker.Options{})
			if err != nil {
				t.Fatal(err)
			}
			writeInChunks(t, f, hist.Bytes(), rand.New(rand.NewSource(int64(len(c.events)))))
			online, err := fl.Finish()
			if err != nil {
				t.Fatal(err)
			}
			sameAsCheckRun(t, online, dir)
		})
	}
}

// A run checked from the recorder's tap (FollowTap) gets the verdict and the report that CheckRun
// gives afterwards on the file the recorder wrote, the reader now and then finding the tap empty.
func TestFollowTapMatchesCheckRun(t *testing.T) {
	for _, c := range []struct {
		name   string
		events []history.Event
	}{
		{"violation", (&synth{clients: 10, duration: 20000 * ms, violation: true}).build()},
		{"generated, two keys", checker.Generate(3, 30000, 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, path := followedRunDir(t)
			rec, err := history.Create(path, time.Now(), nil)
			if err != nil {
				t.Fatal(err)
			}
			fl, err := FollowTap(dir, path, rec, checker.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range c.events {
				rec.Record(e) // stamped with the recorder's clock: both checks read the same file
				if i%3000 == 0 {
					time.Sleep(30 * time.Millisecond)
				}
			}
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
			online, err := fl.Finish()
			if err != nil {
				t.Fatal(err)
			}
			sameAsCheckRun(t, online, dir)
		})
	}
}

// writeInChunks writes b to f as a recorder does, in pieces of any size with pauses between some,
// so the follower often finds the end of the file in the middle of a line.
func writeInChunks(t *testing.T, f *os.File, b []byte, rng *rand.Rand) {
	t.Helper()
	for len(b) > 0 {
		n := min(len(b), 1+rng.Intn(64<<10))
		if _, err := f.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
		if rng.Intn(4) == 0 {
			time.Sleep(time.Duration(rng.Intn(3)) * time.Millisecond)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// writtenBy writes c's results and returns results.json without its timing, report.html and
// summary.txt, timings left out.
// followedRunDir makes a run directory with a run's config.json, and names its history file.
func followedRunDir(t *testing.T) (dir, path string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "single-restart", "20261122T061808.379Z")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(dir, ConfigFile, config(10)); err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, history.FileName)
}

// sameAsCheckRun fails t unless what the check that followed the run writes into dir is what
// CheckRun of dir writes afterwards: results.json, summary.txt and report.html, timings aside.
func sameAsCheckRun(t *testing.T, online *Checked, dir string) {
	t.Helper()
	onlineRes, onlinePage, onlineSummary := writtenBy(t, online, dir)
	offline, err := CheckRun(dir, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	offlineRes, offlinePage, offlineSummary := writtenBy(t, offline, dir)
	if onlineRes != offlineRes {
		t.Errorf("results differ:\nfollowing: %.400s\nafterwards: %.400s", onlineRes, offlineRes)
	}
	if onlineSummary != offlineSummary {
		t.Errorf("summary.txt differs:\nfollowing:\n%s\nafterwards:\n%s", onlineSummary, offlineSummary)
	}
	if onlinePage != offlinePage {
		t.Errorf("report.html differs (%d and %d bytes)", len(onlinePage), len(offlinePage))
	}
}

func writtenBy(t *testing.T, c *Checked, dir string) (res, page, summary string) {
	t.Helper()
	c.Result.CheckDuration = 0
	if err := c.Write(RunInfo{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c.Result)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b), readReport(t, dir), checkedIn.ReplaceAllString(string(s), "")
}

// A run that fails before its history is whole abandons the check at once, whatever it waited on.
func TestFollowRunAbandoned(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, history.FileName)
	if err := os.WriteFile(path, []byte(`{"index":0,"time":1,"type":"invoke","pro`), 0o644); err != nil {
		t.Fatal(err)
	}
	fl, err := FollowRun(dir, path, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * followPoll) // the follower waits at the cut line
	began := time.Now()
	fl.Abandon()
	if took := time.Since(began); took > time.Second {
		t.Errorf("Abandon took %v", took)
	}
	if _, err := fl.Finish(); err == nil {
		t.Error("an abandoned check gave a verdict")
	}
}

// A history that is not a regular file (a test's /dev/full) is not followed: it is checked at the end.
func TestFollowRunRefusesADevice(t *testing.T) {
	if _, err := FollowRun(t.TempDir(), os.DevNull, checker.Options{}); err == nil {
		t.Error("followed a device")
	}
}
