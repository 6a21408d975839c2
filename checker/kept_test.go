package checker

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/lockpick-dev/lockpick/history"
)

// quietHistory writes n grants of one key by 10 processes in turn, each released before the next
// acquire is invoked (a quiet point between every two holds), as JSON lines: the shape of a run at
// the ceiling, where nearly every hold is a segment of its own.
func quietHistory(n int) []byte { return brokenHistory(n, 0) }

// brokenHistory is quietHistory with every overlapEvery-th grant (none if 0) made while the one
// before is still held: a lock that breaks now and then, all through the run.
func brokenHistory(n, overlapEvery int) []byte {
	var b bytes.Buffer
	t, idx := int64(1_000_000), 0
	line := func(typ string, p int, f, extra string) {
		fmt.Fprintf(&b, `{"index":%d,"time":%d,"type":"%s","process":%d,"f":"%s","key":"k0"%s}`+"\n", idx, t, typ, p, f, extra)
		idx++
		t += 50_000
	}
	value := func(i int) string { return fmt.Sprintf(`,"value":"p%d-%d"`, i%10, i) }
	acquire := func(i int) {
		line("invoke", i%10, "acquire", "")
		line("ok", i%10, "acquire", fmt.Sprintf(`%s,"token":%d,"deadline":%d,"validity":100000000,"nodes":["n1"]`, value(i), i+1, t+100_000_000))
	}
	release := func(i int) {
		line("invoke", i%10, "release", value(i))
		line("ok", i%10, "release", value(i))
	}
	for i := 0; i < n; i++ {
		acquire(i)
		if overlapEvery > 0 && i%overlapEvery == overlapEvery-2 && i+1 < n {
			acquire(i + 1)
			release(i)
			release(i + 1)
			i++
			continue
		}
		release(i)
	}
	return b.Bytes()
}

// keptAfterStream is the live heap, in bytes, of what the checker keeps once it has read the
// history (the parser's holds, findings, statistics and store), before the steps after the stream.
func keptAfterStream(t *testing.T, data []byte, foldEvery int) (kept uint64, holds int) {
	t.Helper()
	st := streamStore()
	v, pr := newValidator(st), newParser(st)
	pr.foldStart(Options{foldEvery: foldEvery}.withDefaults())
	s := history.NewScanner(bytes.NewReader(data))
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for s.Scan() {
		st.push(s.Event(), s.Line())
		if err := v.event(st.n - 1); err != nil {
			t.Fatal(err)
		}
		pr.event(st.n - 1)
		st.settle()
		pr.maybeFold()
	}
	p := pr.finish()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(st)
	runtime.KeepAlive(p)
	runtime.KeepAlive(data) // counted in before: it must be in after too
	return after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc), len(p.holds) + p.folded.holdCount()
}

// keptPerGrant streams history(N) and history(4N), N = 20,000 grants, looking for a fold every
// foldEvery grants (negative: never), and returns the bytes kept per grant between the two.
func keptPerGrant(t *testing.T, history func(n int) []byte, foldEvery int) float64 {
	t.Helper()
	const n = 20_000
	small, hs := keptAfterStream(t, history(n), foldEvery)
	large, hl := keptAfterStream(t, history(4*n), foldEvery)
	if hs != n || hl != 4*n {
		t.Fatalf("holds: %d and %d, want %d and %d", hs, hl, n, 4*n)
	}
	per := float64(large-min(large, small)) / float64(hl-hs)
	t.Logf("kept: %d bytes for %d grants, %d for %d: %.0f bytes a grant", small, hs, large, hl, per)
	return per
}

// TestKeptStatePerGrant bounds what the checker keeps for each grant of a long run: 4N grants may
// cost at most 4x (plus slack) what N cost, and each grant at most maxKeptPerGrant bytes. The
// checker still keeps one hold per grant (see docs/speed.md, "The checker's own memory"), so this
// fails if that record grows back, or if anything else starts to be kept per event.
func TestKeptStatePerGrant(t *testing.T) {
	if s := unsafe.Sizeof(hold{}); s > 128 {
		t.Errorf("a hold is %d bytes, more than 128", s)
	}
	if s := unsafe.Sizeof(segment{}); s > 56 {
		t.Errorf("a segment is %d bytes, more than 56", s)
	}
	per := keptPerGrant(t, quietHistory, -1)
	// A hold (128 bytes, its value's few bytes), its place among the culprits' releases (40 bytes),
	// two latencies (8 bytes), and the slack of slices grown by append: 201 bytes measured, 266
	// before holds and segments were narrowed.
	const maxKeptPerGrant = 225
	if per > maxKeptPerGrant {
		t.Errorf("the checker keeps %.0f bytes a grant, more than %d", per, maxKeptPerGrant)
	}
}

// withPlan is a history led by a run plan of the mutex workload, so that its check folds.
func withPlan(history []byte) []byte {
	plan := `{"index":0,"time":1,"type":"invoke","process":-2,"f":"run","plan":{"lock":"single","workload":"mutex","keys":["k0"],"clients":10,"ttl":100000000}}` + "\n"
	// The plan takes index 0: the others move up by one.
	var b bytes.Buffer
	b.WriteString(plan)
	for i, line := range bytes.Split(bytes.TrimSuffix(history, []byte("\n")), []byte("\n")) {
		b.Write(bytes.Replace(line, []byte(fmt.Sprintf(`{"index":%d,`, i)), []byte(fmt.Sprintf(`{"index":%d,`, i+1)), 1))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// TestFoldedStatePerGrant bounds what a folding check keeps for each grant of a long run of the
// mutex workload (fold.go): the folded holds are gone, and what stays per grant is the value index's
// entry (24 bytes) and two latencies (4 bytes each). A lock that breaks all through the run costs
// the same (foldfindings.go): what the listed findings name is bounded by their limit.
func TestFoldedStatePerGrant(t *testing.T) {
	for _, c := range []struct {
		name         string
		overlapEvery int
	}{{"quiet", 0}, {"overlapping", 100}} {
		t.Run(c.name, func(t *testing.T) {
			per := keptPerGrant(t, func(n int) []byte { return withPlan(brokenHistory(n, c.overlapEvery)) }, 1<<12)
			// Measured: 37 (the entry, the latencies, the slack of slices grown by append).
			const maxKeptPerGrant = 50
			if per > maxKeptPerGrant {
				t.Errorf("the folding check keeps %.0f bytes a grant, more than %d", per, maxKeptPerGrant)
			}
		})
	}
}
