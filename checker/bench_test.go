package checker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// BenchmarkCheckOneMillionOps checks a generated history of a million operations (about two million
// events) on one hot key. The target is under 10 s and 1 GiB on a 2-core machine.
func BenchmarkCheckOneMillionOps(b *testing.B) {
	events := Generate(1, 1_000_000, 1)
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	historyRSS := peakRSS() // the history itself, resident before checking
	b.ResetTimer()
	var r *Result
	for b.Loop() {
		var err error
		r, err = Check(events, Options{})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if r.Valid != Valid {
		b.Fatalf("generated history judged %s:\n%s", r.Valid, r.Summary())
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(peakRSS(), "peak-RSS-MiB")
	b.ReportMetric(historyRSS, "history-RSS-MiB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-inuse-MiB")
	b.ReportMetric(float64(len(events)), "events")
	b.ReportMetric(float64(r.Stats.Holds), "holds")
	b.ReportMetric(float64(r.Segments), "segments")
	b.Log(firstLines(r.Summary(), 4))
}

// BenchmarkReadAndCheckOneMillionOps is what `lockpick check` does with such a history: read the
// JSON lines from disk one event at a time and check them (goal: under 1.5 s and 250 MiB).
func BenchmarkReadAndCheckOneMillionOps(b *testing.B) {
	path := filepath.Join(b.TempDir(), history.FileName)
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, e := range Generate(1, 1_000_000, 1) {
		enc.Encode(e)
	}
	w.Flush()
	f.Close()
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS() // the peak should be what reading and checking take, not generating
	b.ResetTimer()
	var r *Result
	for b.Loop() {
		var err error
		if r, err = CheckFile(path, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if r.Valid != Valid {
		b.Fatalf("generated history judged %s", r.Valid)
	}
	if hwm := peakRSS(); hwm > 0 {
		b.ReportMetric(hwm, "peak-RSS-MiB")
	}
	if fi, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// resetPeakRSS resets the kernel's high-water mark of this process's resident set (Linux).
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS reads the resident-set high-water mark, in MiB, since start or the last resetPeakRSS.
func peakRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib float64
			fmt.Sscanf(strings.TrimSpace(v), "%f", &kib)
			return kib / 1024
		}
	}
	return -1
}
