package harness

import "testing"

// BenchmarkDriveProfile runs the harness alone at the ceiling (BenchmarkCeiling's runs without
// the bare loop beside them), so that a CPU profile of it holds only the harness's work:
// `go test ./harness -run '^$' -bench DriveProfile/single -benchtime 3x -cpuprofile cpu.prof`, then
// `go tool pprof -top -cum harness.test cpu.prof`. The profile also holds the benchmark's own
// reading of each history back (harnessOps), which a run does not do. DriveProfile/bare is the
// bare loop alone, the base to set a harness profile beside (`go tool pprof -diff_base`).
func BenchmarkDriveProfile(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		for range b.N {
			rate, _, _ := bareLoop(b, 1)
			b.ReportMetric(rate, "ops/s")
		}
	})
	for _, c := range []struct{ name, lock, nemesis string }{
		{"single", "single", "none"},
		{"redlock", "redlock", "none"},
		{"single-linked", "single", "latency:interval=1h"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				rate, _, _ := harnessOps(b, c.lock, c.nemesis)
				b.ReportMetric(rate, "ops/s")
			}
		})
	}
}
