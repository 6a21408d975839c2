package checker

import (
	"runtime"
	"syscall"
	"testing"
)

// BenchmarkCheckOneMillionOps checks a generated history of a million operations (about two million
// events) on one hot key. The target is under 10 s and 1 GiB on a 2-core machine.
func BenchmarkCheckOneMillionOps(b *testing.B) {
	events := Generate(1, 1_000_000, 1)
	runtime.GC()
	var ru syscall.Rusage
	genRSS := -1.0
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		genRSS = float64(ru.Maxrss) / 1024 // the history itself, before checking
	}
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
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MiB") // Maxrss is in KiB on Linux
	}
	b.ReportMetric(genRSS, "gen-peak-RSS-MiB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-inuse-MiB")
	b.ReportMetric(float64(len(events)), "events")
	b.ReportMetric(float64(r.Stats.Holds), "holds")
	b.ReportMetric(float64(r.Segments), "segments")
	b.Log(r.Summary())
}
