package checker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// checkStreamed checks evs as lockpick check does, from their JSON lines one event at a time, and
// fails unless the result is the one checking the whole slice gives: the same verdict, the same
// results.json and the same summary. It returns the streamed result, or the error both gave.
func checkStreamed(t *testing.T, evs []history.Event, opts Options) (*Result, error) {
	t.Helper()
	buf, l := jsonLines(t, evs)
	whole, werr := CheckLog(l, opts)
	streamed, serr := CheckReader(buf, opts)
	if (werr == nil) != (serr == nil) || werr != nil && werr.Error() != serr.Error() {
		t.Fatalf("streamed check says %v, the whole history %v", serr, werr)
	}
	if werr != nil {
		return nil, serr
	}
	if a, b := resultText(t, whole), resultText(t, streamed); a != b {
		t.Fatalf("streamed result differs from the whole history's:\n%s\n---\n%s", b, a)
	}
	// And so must folding, looked for after every 1 to 5 grants (a look costs a few maps), on a
	// third of the histories (by length: the same ones every run), as TestFoldingKeepsTheResult
	// does on its own 320.
	if len(evs)%3 == 0 {
		checkFolded(t, evs, opts, 1+len(evs)%5)
	}
	return streamed, nil
}

// jsonLines writes evs as JSON lines, and reads them back as a whole history.
func jsonLines(t *testing.T, evs []history.Event) (*bytes.Buffer, *history.Log) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range evs {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	l, err := history.ReadLog(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	return &buf, l
}

func resultText(t *testing.T, r *Result) string {
	t.Helper()
	c := *r
	c.CheckDuration = 0
	b, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n" + c.Summary()
}

// Streaming keeps the verdict and every figure of the result on generated, random, counter and
// broken histories.
func TestStreamedCheckMatchesWholeHistory(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	checkStreamed(t, Generate(5, 20000, 3), Options{})
	rng := rand.New(rand.NewSource(7))
	for range 300 {
		checkStreamed(t, randomHistory(rng, 2+rng.Intn(4), 1+rng.Intn(2), 10+rng.Intn(50)), Options{})
	}
	checkStreamed(t, genCounter(3, 200, 7), Options{})
	for _, guard := range []string{"none", "fencing"} {
		h := pausedRun(guard, history.OK, 1)
		sortByTime(h.evs)
		checkStreamed(t, h.evs, Options{})
	}
	// A broken history: the same error, naming the same line.
	evs := Generate(5, 100, 1)
	evs[57].Index = evs[56].Index
	if _, err := checkStreamed(t, evs, Options{}); err == nil || !strings.Contains(err.Error(), "line 58") {
		t.Fatalf("want an error naming line 58, got %v", err)
	}
}

// Past blank lines, a streamed check still names the line of the file.
func TestStreamedCheckNamesLinesPastBlankLines(t *testing.T) {
	in := `{"index":0,"time":1,"type":"invoke","process":0,"f":"acquire","key":"k"}` + "\n\n\n" +
		`{"index":1,"time":2,"type":"ok","process":0,"f":"acquire","key":"k","deadline":9}` + "\n\n" +
		`{"index":1,"time":3,"type":"invoke","process":0,"f":"release","key":"k"}` + "\n"
	_, err := CheckReader(strings.NewReader(in), Options{})
	if err == nil || !strings.Contains(err.Error(), "line 6") || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("want an error naming line 6 and line 4, got %v", err)
	}
}

// Streaming keeps every field of the result on random reentrant histories too: re-entries, extends
// and renewals, lost and unknown releases, crashes and node kills (reentrantHistory), and on random
// histories with late, foreign and value-less releases, whose ok releases the culprits keep by their
// hold (relOp).
func TestStreamedCheckMatchesWholeOnReentrantHistories(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	rng := rand.New(rand.NewSource(11))
	for range 200 {
		checkStreamed(t, reentrantHistory(rng), Options{})
	}
	for range 200 {
		checkStreamed(t, randomHistory(rng, 2+rng.Intn(5), 1+rng.Intn(3), 30+rng.Intn(120)), Options{})
	}
}

// withMutexPlan is evs led by a run plan of the mutex workload (re-indexed), so that a streamed
// check may fold its holds (fold.go); ok false for a history with reads or writes of a resource,
// which folding leaves alone.
func withMutexPlan(evs []history.Event) ([]history.Event, bool) {
	if len(evs) == 0 {
		return nil, false
	}
	for i := range evs {
		if isResourceOp(evs[i].F) {
			return nil, false
		}
	}
	out := slices.Clone(evs)
	if pl := out[0].Plan; pl != nil {
		c := *pl
		c.Workload = "mutex"
		out[0].Plan = &c
		return out, true
	}
	run := history.Event{Time: out[0].Time, Type: history.Invoke, Process: history.HarnessProcess, F: history.FRun,
		Plan: &history.Plan{Lock: "test", Workload: "mutex"}}
	out = append([]history.Event{run}, out...)
	for i := range out {
		out[i].Index = int64(i)
	}
	return out, true
}

// checkFolded checks evs, led by a mutex plan, whole and streamed with a fold looked for after
// every `every` grants, and fails unless both give the same result and page (see checkStreamed).
// The visualization draws opts.MaxVisualizedOps operations (1 if unset: none), so folding is
// allowed. It returns how many holds the streamed check folded, and whether a fold took in a
// finding (an overlap or a fencing token that went back).
func checkFolded(t *testing.T, evs []history.Event, opts Options, every int) (folded int, finding bool) {
	t.Helper()
	evs, ok := withMutexPlan(evs)
	if !ok {
		return 0, false
	}
	opts.foldEvery = every
	if opts.MaxVisualizedOps == 0 {
		opts.MaxVisualizedOps = 1
	}
	buf, l := jsonLines(t, evs)
	whole, werr := CheckLog(l, opts)
	streamed, fs, serr := checkSource(history.NewScanner(buf), opts)
	if (werr == nil) != (serr == nil) || werr != nil && werr.Error() != serr.Error() {
		t.Fatalf("folding check says %v, the whole history %v", serr, werr)
	}
	if werr != nil {
		return 0, false
	}
	if a, b := resultText(t, whole), resultText(t, streamed); a != b {
		t.Fatalf("folding check (%d holds folded) differs from the whole history's: %s", fs.holdCount(), firstDifference(b, a))
	}
	var wp, sp bytes.Buffer
	if err := whole.Visualize(&wp); err != nil {
		t.Fatal(err)
	}
	if err := streamed.Visualize(&sp); err != nil {
		t.Fatal(err)
	}
	if a, b := drawnPage(wp.String()), drawnPage(sp.String()); a != b {
		t.Fatalf("folding check (%d holds folded) draws another page than the whole history's: %s", fs.holdCount(), firstDifference(b, a))
	}
	return fs.holdCount(), fs != nil && (fs.findings.violations > 0 || fs.findings.regressions > 0)
}

// Folding (fold.go) keeps every field of the result, on random histories of every kind, folded as
// often as they allow; and folds in most of each kind that has holds to fold.
func TestFoldingKeepsTheResult(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(29))
	kinds := []struct {
		name string
		gen  func() []history.Event
		// least is the share of histories that must fold: a finding early in a history, or a
		// hold that lasts, stops its folding.
		least int
	}{
		{"generated", func() []history.Event { return Generate(rng.Int63(), 1000+rng.Intn(2000), 2+rng.Intn(4)) }, 2},
		{"random", func() []history.Event { return randomHistory(rng, 2+rng.Intn(4), 1+rng.Intn(2), 10+rng.Intn(300)) }, 4},
		{"reentrant", func() []history.Event { return reentrantHistory(rng) }, 4},
		{"shared values", func() []history.Event { return fewValues(randomHistory(rng, 2+rng.Intn(4), 1, 50+rng.Intn(300))) }, 4},
	}
	for _, k := range kinds {
		var hists, folding, folded int
		for range 50 {
			n, _ := checkFolded(t, k.gen(), Options{}, 1)
			hists++
			if n > 0 {
				folding++
			}
			folded += n
		}
		t.Logf("%s: %d of %d histories folded, %d holds in all", k.name, folding, hists, folded)
		if folding < hists/k.least {
			t.Errorf("%s: only %d of %d histories folded any hold: the test shows little", k.name, folding, hists)
		}
	}
}

// tokensReset moves the fencing tokens granted in a random stretch of evs down, as a token counter
// that lost its state hands out: a run of acquires whose tokens go back, across many folds.
func tokensReset(evs []history.Event, rng *rand.Rand) []history.Event {
	from := rng.Intn(len(evs)/2 + 1)
	to := from + rng.Intn(len(evs)-from)
	drop := int64(5 + rng.Intn(40))
	for i := from; i < to; i++ {
		if evs[i].Token > drop {
			evs[i].Token -= drop
		}
	}
	return evs
}

// partialLinearizations are what porcupine's page shows of the longest partial linearizations it
// found, which vary from one search to the next (the same history checked twice), where it records
// them from several goroutines.
var partialLinearizations = regexp.MustCompile(`"PartialLinearizations":.*?\]\],"Largest":\{[^}]*\}`)

// drawnPage is a porcupine page without its partial linearizations: the operations, partitions and
// annotations it draws.
func drawnPage(page string) string {
	return partialLinearizations.ReplaceAllString(page, "")
}

// Folding goes on past a finding (foldfindings.go): a run that broke the lock early keeps its
// memory flat too, and still gives the whole history's result and page, with the listed findings cut
// at every limit and the page drawing some of the failed segments and not others.
func TestFoldingPastFindingsKeepsTheResult(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(31))
	gens := []func() []history.Event{
		func() []history.Event { return randomHistory(rng, 2+rng.Intn(4), 1+rng.Intn(3), 50+rng.Intn(300)) },
		func() []history.Event {
			return fewValues(randomHistory(rng, 2+rng.Intn(4), 1+rng.Intn(2), 50+rng.Intn(300)))
		},
		func() []history.Event { return reentrantHistory(rng) },
		func() []history.Event {
			return tokensReset(Generate(rng.Int63(), 400+rng.Intn(800), 1+rng.Intn(3)), rng)
		},
	}
	var hists, withFinding int
	for i := range 240 {
		opts := Options{MaxViolations: 1 + rng.Intn(4), MaxVisualizedOps: []int{1, 12, 40, 200}[i/len(gens)%4]}
		_, found := checkFolded(t, gens[i%len(gens)](), opts, 1+rng.Intn(3))
		hists++
		if found {
			withFinding++
		}
	}
	t.Logf("%d of %d histories folded a finding", withFinding, hists)
	if withFinding < hists/4 {
		t.Errorf("only %d of %d histories folded a finding: the test shows little", withFinding, hists)
	}
}

// firstDifference shows where got and want first differ, with some context.
func firstDifference(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(i-300, 0)
	return fmt.Sprintf("at byte %d:\n got: ...%s\nwant: ...%s", i, got[from:min(len(got), i+200)], want[from:min(len(want), i+200)])
}

// fewValues gives evs's leases one of five values, the same for an acquire and the releases and
// work that name it, so that processes share values.
func fewValues(evs []history.Event) []history.Event {
	for i := range evs {
		if v := evs[i].Value; v != "" && evs[i].F != history.FRead && evs[i].F != history.FWrite {
			evs[i].Value = fmt.Sprintf("v%d", len(v)*7%5)
		}
	}
	return evs
}
