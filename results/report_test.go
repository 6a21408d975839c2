package results

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
)

const ms = int64(time.Millisecond)

// synth builds a history the way the harness records one: clients slots take turns holding the
// lock (one slice of 100ms each), the others try and fail meanwhile. With violation set, a restart
// of n1 at 6.36s lets slot 4 in while slot 3 still holds: two holds overlap on [6.41s, 6.45s].
// With violations past one, each further one comes 0.8s after the one before, let in by a restart
// of half a millisecond: a fault window a pixel wide, with its kill and start 0.3ms apart.
type synth struct {
	clients  int
	duration int64
	// retire makes every slot's process id move on by clients after each of its holds, as an
	// indeterminate result does in workloads/client.go.
	retire     bool
	violation  bool
	violations int
	events     []history.Event
}

// violationAt reports whether slice n's holder holds into the next slice, and whether it is the
// holder let in while the one before still holds.
func (s *synth) violationAt(n int) (overrun, early bool) {
	count := s.violations
	if s.violation {
		count = max(count, 1)
	}
	in := func(n int) bool { return n >= 63 && (n-63)%8 == 0 && (n-63)/8 < count }
	return in(n), in(n - 1)
}

func (s *synth) add(e history.Event) { s.events = append(s.events, e) }

func (s *synth) build() []history.Event {
	const slice = 100 * ms
	pids := make([]int, s.clients)
	for i := range pids {
		pids[i] = i
	}
	for start := int64(0); start+slice <= s.duration; start += slice {
		n := int(start / slice)
		holder := n % s.clients
		for slot := range s.clients {
			p := pids[slot]
			if slot != holder {
				for t := start + int64(slot)*ms/3; t+5*ms < start+slice; t += 10 * ms {
					s.add(history.Event{Time: t, Type: history.Invoke, Process: p, F: history.FAcquire, Key: "k"})
					s.add(history.Event{Time: t + ms/3, Type: history.Fail, Process: p, F: history.FAcquire, Key: "k", Reason: history.ReasonHeld})
				}
				continue
			}
			acq, rel := start+ms/10, start+80*ms
			overrun, early := s.violationAt(n)
			if overrun {
				rel = start + 150*ms // slot 3 holds past the restart, into slot 4's slice
				if n > 63 {
					// 155ms: its release is then between its attempts in the next slice.
					rel = start + 155*ms
					s.restart(start+60*ms, ms/5, ms/2)
				}
			}
			if early {
				acq = start + 10*ms
			}
			value := "v" + string(rune('a'+n%26)) + string(rune('a'+n/26%26))
			s.add(history.Event{Time: acq, Type: history.Invoke, Process: p, F: history.FAcquire, Key: "k"})
			s.add(history.Event{Time: acq + ms/3, Type: history.OK, Process: p, F: history.FAcquire, Key: "k", Value: value, Deadline: acq + 2000*ms, Validity: 2000 * ms, Nodes: []string{"n1"}})
			s.add(history.Event{Time: rel, Type: history.Invoke, Process: p, F: history.FRelease, Key: "k", Value: value})
			s.add(history.Event{Time: rel + ms/2, Type: history.OK, Process: p, F: history.FRelease, Key: "k", Value: value})
			if s.retire {
				pids[slot] += s.clients
			}
		}
	}
	if s.violation || s.violations > 0 {
		s.restart(6360*ms, 5*ms, 40*ms)
	}
	sort.SliceStable(s.events, func(i, j int) bool { return s.events[i].Time < s.events[j].Time })
	for i := range s.events {
		s.events[i].Index = int64(i)
	}
	return s.events
}

// restart kills n1 at t, and starts it again when the kill completes (after kill), the start
// completing at t+window.
func (s *synth) restart(t, kill, window int64) {
	nem := func(t int64, typ history.Type, f, effect string) {
		s.add(history.Event{Time: t, Type: typ, Process: history.NemesisProcess, F: f, Nodes: []string{"n1"}, Fault: "restart", Effect: effect})
	}
	nem(t, history.Invoke, "kill", history.EffectFault)
	nem(t+kill, history.Info, "kill", history.EffectFault)
	nem(t+kill+min(ms, (window-kill)/2), history.Invoke, "start", history.EffectHeal)
	nem(t+window, history.Info, "start", history.EffectHeal)
}

// writeRun stores a synthetic run in a new run directory and checks it, as harness.Check does.
func writeRun(t testing.TB, s *synth, meta map[string]any) (string, *checker.Result) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "single-restart", "20261122T061808.379Z")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	events := s.build()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, history.FileName), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(dir, ConfigFile, meta); err != nil {
		t.Fatal(err)
	}
	res, err := checker.Check(events, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, res, RunInfo{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	return dir, res
}

func config(clients int) map[string]any {
	return map[string]any{"name": "single-restart", "lock": "single", "nemesis": "restart", "workload": "mutex",
		"clients": clients, "keys": 1, "ttl": "2s", "time_limit": "20s", "recovery": "5s", "seed": 7, "revision": "0123456789abcdef0123456789abcdef01234567-dirty"}
}

func TestReportShowsTheViolationSelfContained(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	dir, res := writeRun(t, &synth{clients: 10, duration: 20000 * ms, violation: true}, config(10))
	if res.Valid != checker.Invalid || res.ViolationCount != 1 {
		t.Fatalf("the synthetic history should hold exactly one violation, got %s with %d", res.Valid, res.ViolationCount)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		`data-role="hold-a"`, `data-role="hold-b"`, `data-role="fault"`, `data-role="overlap"`,
		"INVALID", "seed", ">7<", "0123456789ab-dirty", // header: verdict, seed, short revision
		"A: p3 (slot 3)", "B: p4 (slot 4)", "granted by n1", "node n1",
		res.Violations[0].Cause, "linearizability.html",
		`src="data:image/png;base64,`, // the plots, inline
	} {
		if !strings.Contains(page, htmlText(want)) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	// Self-contained: nothing is loaded from anywhere else.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//`).FindString(page); m != "" {
		t.Errorf("report.html loads %s from the network", m)
	}
	if strings.Contains(page, "<link") {
		t.Error("report.html links an external resource")
	}
	for _, f := range []string{LatencyPlotFile, RatePlotFile} {
		png, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG (%v)", f, err)
		}
	}
}

// htmlText escapes a string as html/template writes text.
func htmlText(s string) string {
	r := strings.NewReplacer("'", "&#39;", "&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;")
	if strings.HasPrefix(s, "data-role") || strings.HasPrefix(s, "src=") || strings.HasPrefix(s, ">") {
		return s
	}
	return r.Replace(s)
}

// The whole-run timeline has one lane per slot: a process id p runs in slot p mod clients, so a
// run whose processes retire after every hold still draws 10 lanes, and a hold of p13 lands in slot 3.
func TestTimelineLanesAreSlots(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	s := &synth{clients: 10, duration: 5000 * ms, retire: true}
	dir, res := writeRun(t, s, config(10))
	d, err := readRunData(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	tl := timelineData(res, d)
	if len(tl.Slots) != 10 {
		t.Fatalf("%d lanes, want one per client slot: 10", len(tl.Slots))
	}
	found := false
	for _, ev := range s.events {
		if ev.Type == history.OK && ev.F == history.FAcquire && ev.Process == 13 {
			found = true
			ok := tl.Slots[3].OK
			var inv int64
			hit := false
			for i := 0; i < len(ok); i += 5 {
				inv += ok[i]
				hit = hit || (ok[i+4] == 13 && inv == us(ev.Time-ms/3))
			}
			if !hit {
				t.Errorf("the hold of p13 at %s is not on slot 3's lane", checker.FormatTime(ev.Time))
			}
		}
	}
	if !found {
		t.Fatal("the synthetic history has no hold of p13; the test proves nothing")
	}
}

// A run of 100 clients over a minute, with a failed attempt every 10ms per client, stays under
// 5 MB: failed acquires are binned past maxExactFails.
func TestReportSizeIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and checks a history of about a million events")
	}
	s := &synth{clients: 100, duration: 60000 * ms, violation: true}
	began := time.Now()
	dir, res := writeRun(t, s, config(100))
	fi, err := os.Stat(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events, %d acquires: report.html %.2f MB, checked and written in %s", len(s.events), res.Stats.Acquires.Total(), float64(fi.Size())/1e6, time.Since(began).Round(time.Millisecond))
	if res.Stats.Acquires.Fail < 2*maxExactFails {
		t.Fatalf("only %d failed acquires: too few to exercise the binning", res.Stats.Acquires.Fail)
	}
	if fi.Size() > 5<<20 {
		t.Errorf("report.html is %d bytes, over 5 MB", fi.Size())
	}
}

// The lost updates the page locates add up to the checker's count on a counter that went back.
func TestLostUpdatesLocated(t *testing.T) {
	ws := []write{
		{key: "k", value: 1, comp: 1, accepted: true},
		{key: "k", value: 2, comp: 2, accepted: true},
		{key: "k", value: 3, comp: 3, accepted: true},
		{key: "k", value: 4, comp: 4, accepted: false}, // rejected by the guard: no effect
		{key: "k", value: 2, comp: 5, accepted: true},  // a stale write: 2 and 3 are lost
		{key: "k", value: 3, comp: 6, accepted: true},
		{key: "k", value: 3, comp: 7, accepted: true}, // two holders wrote 3: one increment lost
	}
	var total int64
	for _, l := range lostUpdates(ws) {
		total += l.lost
	}
	// 6 accepted increments from 0, final value 3: 3 lost.
	if total != 3 {
		t.Fatalf("located %d lost updates, want 3", total)
	}
}

// A run in which no acquire completed (its clients never got to work) still gets its report: the
// latency plot's log axis has nothing to span, and must not fail the run that was checked.
func TestReportOfARunWithoutAcquires(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	dir, res := writeRun(t, &synth{clients: 3, duration: 0}, map[string]any{"lock": "py-tooz"})
	if _, err := os.Stat(filepath.Join(dir, LatencyPlotFile)); err != nil {
		t.Fatalf("no latency plot: %v", err)
	}
	// Its verdict is unknown, and the page says why under the verdict, not only in the evidence.
	b, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if res.Valid != checker.Unknown || !strings.Contains(string(b), `<div class="why">`+htmlText(res.UnknownReason)+`</div>`) {
		t.Errorf("verdict %s: the header should give the reason it is unknown, %q", res.Valid, res.UnknownReason)
	}
}

// The page leads with the whole run, then the first violation; the others are folded behind one
// line that counts them, and the evidence comes after the plots. (The browser test measures where
// they land; this holds where no Chromium is.)
func TestReportOrder(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	dir, res := writeRun(t, &synth{clients: 10, duration: 10000 * ms, violations: 3}, config(10))
	if res.ViolationCount != 3 {
		t.Fatalf("the synthetic history should hold 3 violations, got %d", res.ViolationCount)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	page, last := string(b), -1
	for _, want := range []string{`id="whole-run"`, `id="violation-1"`, `<details class="rest"`, "<summary>2 more violations</summary>",
		`id="violation-2"`, `id="violation-3"`, `</details>`, `class="plots"`, `class="evidence"`} {
		i := strings.Index(page, want)
		if i < 0 {
			t.Fatalf("report.html lacks %s", want)
		}
		if i < last {
			t.Errorf("%s comes before what should precede it", want)
		}
		last = i
	}
}
