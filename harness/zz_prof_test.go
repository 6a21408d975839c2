package harness

import "testing"

func BenchmarkZZProfSingle(b *testing.B) {
	for range b.N {
		b.ReportMetric(harnessOps(b, "single", "none"), "ops/s")
	}
}
func BenchmarkZZProfRedlock(b *testing.B) {
	for range b.N {
		b.ReportMetric(harnessOps(b, "redlock", "none"), "ops/s")
	}
}
func BenchmarkZZProfLinked(b *testing.B) {
	for range b.N {
		b.ReportMetric(harnessOps(b, "single", "latency:interval=1h"), "ops/s")
	}
}
