package browse

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/results"
)

const secret = "the-secret-outside-the-store"

// makeStore writes n runs the way the harness does (config.json, results.json, summary.txt,
// report.html), a matrix card, store/latest, and files outside the store that links point at.
func makeStore(t testing.TB, n int) string {
	t.Helper()
	base := t.TempDir()
	store := filepath.Join(base, "store")
	outside := filepath.Join(base, "outside")
	must(t, os.MkdirAll(outside, 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "secret.md"), []byte(secret), 0o644))
	start := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	var last string
	for i := range n {
		lock, nem := []string{"single", "redlock", "fenced"}[i%3], []string{"restart", "none"}[i%2]
		dir, err := results.NewRunDir(store, lock+"-"+nem, start.Add(time.Duration(i)*time.Minute))
		must(t, err)
		// Seeds as the run command draws them: large.
		must(t, results.WriteJSON(dir, results.ConfigFile, map[string]any{"lock": lock, "nemesis": nem, "workload": "mutex",
			"seed": uint64(1<<63) + uint64(i)*7919, "version": "v0.0.0-20261126183932-46dafc325a37", "ttl": "2s", "clients": 10}))
		res := fakeResult(i)
		must(t, results.WriteJSON(dir, results.ResultsFile, results.Document{Result: res, Run: results.RunInfo{Dir: dir}}))
		must(t, os.WriteFile(filepath.Join(dir, results.SummaryFile), []byte(res.Summary()), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, results.ReportFile), []byte("<html>report "+fmt.Sprint(i)+"</html>"), 0o644))
		last = dir
	}
	must(t, results.LinkLatest(store, last))
	card := filepath.Join(store, "matrix", "20261122T070000.000Z")
	must(t, os.MkdirAll(card, 0o755))
	rel, _ := filepath.Rel(store, last)
	must(t, os.WriteFile(filepath.Join(card, results.CardMarkdown), []byte("# lockpick report card\n\n| lock | verdicts |\n|---|---|\n| single | 1/1 invalid |\n\n- single `restart` seed 1: invalid — "+filepath.Join(store, rel)+"\n\n<script>alert(1)</script>\n"), 0o644))
	// Links that point out of the store, absolute and relative, and one that stays inside.
	must(t, os.Symlink(outside, filepath.Join(store, "evil")))
	must(t, os.Symlink("../../../outside/secret.txt", filepath.Join(last, "escape.txt")))
	must(t, os.Symlink("../../outside/secret.md", filepath.Join(card, "escape.md")))
	return store
}

// fakeResult is a checked result with violations every third run, about as large as a real one.
func fakeResult(i int) *checker.Result {
	r := &checker.Result{Valid: checker.Valid, LockValid: checker.Valid, Porcupine: "ok", Violations: []checker.Violation{}, Overruns: []checker.Overrun{}}
	r.Stats.Acquires = checker.Counts{OK: 100 + i, Fail: 5000}
	r.Stats.AcquiresOKShare = float64(r.Stats.Acquires.OK) / float64(r.Stats.Acquires.Total())
	if i%3 == 0 {
		r.Valid, r.LockValid, r.Porcupine = checker.Invalid, checker.Invalid, "illegal"
		for v := range 50 {
			r.Violations = append(r.Violations, checker.Violation{Key: "k", Description: strings.Repeat("a violation explained at length ", 8),
				Nemesis: []history.Event{{Type: history.Invoke, Process: -1, F: "kill", Nodes: []string{"n1"}, Time: int64(v)}}})
		}
		r.ViolationCount = len(r.Violations)
	}
	return r
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil) // as sent, before any cleaning
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// No request reaches a file outside the store: not with "..", not encoded, not through a link.
func TestServesOnlyInsideTheStore(t *testing.T) {
	store := makeStore(t, 3)
	s, err := New(store)
	must(t, err)
	defer s.Close()
	latest, _ := os.Readlink(filepath.Join(store, "latest"))
	run := filepath.ToSlash(latest)
	for _, p := range []string{
		"/files/../outside/secret.txt",
		"/files/..%2foutside%2fsecret.txt",
		"/files/evil/secret.txt",
		"/files/" + run + "/escape.txt",
		"/files/latest/escape.txt",
		"/card/../outside/secret.md",
		"/card/evil/secret.md",
		"/card/matrix/20261122T070000.000Z/escape.md",
		"/files/%2e%2e/outside/secret.txt",
	} {
		code, body := get(t, s, p)
		if strings.Contains(body, secret) || code == http.StatusOK {
			t.Errorf("GET %s: %d, %q: a file outside the store was served", p, code, trim(body))
		}
	}
	// Through a real connection too, where nothing cleans the path first.
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, p := range []string{"/files/../outside/secret.txt", "/files/evil/secret.txt", "/card/evil/secret.md"} {
		if body := rawGet(t, srv.Listener.Addr().String(), p); strings.Contains(body, secret) {
			t.Errorf("raw GET %s served the secret", p)
		}
	}
	// What is inside is served, also through store/latest.
	for _, p := range []string{"/files/" + run + "/summary.txt", "/files/latest/summary.txt", "/files/" + run + "/report.html"} {
		if code, body := get(t, s, p); code != http.StatusOK || body == "" {
			t.Errorf("GET %s: %d, want the file", p, code)
		}
	}
}

func rawGet(t *testing.T, addr, path string) string {
	c, err := net.Dial("tcp", addr)
	must(t, err)
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path)
	b, _ := io.ReadAll(c)
	return string(b)
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func TestIndexNewestFirstWithFilters(t *testing.T) {
	store := makeStore(t, 6)
	s, err := New(store)
	must(t, err)
	defer s.Close()
	code, body := get(t, s, "/")
	if code != http.StatusOK {
		t.Fatalf("index: %d", code)
	}
	// Runs 0..5 start a minute apart: 5 is listed first, 0 last.
	i5, i0 := strings.Index(body, "20261122T060500.000Z"), strings.Index(body, "20261122T060000.000Z")
	if i5 < 0 || i0 < 0 || i5 > i0 {
		t.Errorf("runs not newest first (positions %d, %d)", i5, i0)
	}
	if !strings.Contains(body, `class="v v-invalid"`) || !strings.Contains(body, `class="v v-valid"`) {
		t.Error("verdicts are not coloured")
	}
	if !strings.Contains(body, "/card/matrix/20261122T070000.000Z/report.md") {
		t.Error("the matrix card is not listed")
	}
	_, body = get(t, s, "/?lock=single&verdict=invalid")
	if n := strings.Count(body, `<tr data-verdict=`); n != 2 {
		t.Errorf("lock=single&verdict=invalid lists %d runs, want 2 (runs 0 and 3)", n)
	}
	if strings.Contains(body, `data-verdict="valid"`) || strings.Contains(body, "<td>redlock</td>") {
		t.Error("the filter let other runs through")
	}
}

func TestCardIsRenderedWithLinksAndNoScript(t *testing.T) {
	store := makeStore(t, 2)
	s, err := New(store)
	must(t, err)
	defer s.Close()
	code, body := get(t, s, "/card/matrix/20261122T070000.000Z/report.md")
	if code != http.StatusOK {
		t.Fatalf("card: %d", code)
	}
	if !strings.Contains(body, "<table>") || !strings.Contains(body, "<h1>lockpick report card</h1>") {
		t.Error("the card's markdown is not rendered")
	}
	if !strings.Contains(body, `<a href="/run/redlock-none/20261122T060100.000Z/">`) {
		t.Error("the run the card names is not a link to its page")
	}
	if !strings.Contains(body, `<a href="/">`) {
		t.Error("the card's page has no way back to the index")
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("raw HTML in a card reaches the page")
	}
}

// The index over 200 runs must render in under a second; the first request reads every
// results.json, later ones only what changed.
func TestIndexOf200Runs(t *testing.T) {
	store := makeStore(t, 200)
	s, err := New(store)
	must(t, err)
	defer s.Close()
	for _, pass := range []string{"cold", "warm"} {
		began := time.Now()
		code, body := get(t, s, "/")
		took := time.Since(began)
		if code != http.StatusOK || strings.Count(body, "<tr data-verdict=") != 200 {
			t.Fatalf("%s index: %d with %d runs", pass, code, strings.Count(body, "<tr data-verdict="))
		}
		t.Logf("index of 200 runs, %s cache: %s, %d KB", pass, took.Round(time.Microsecond), len(body)/1024)
	}
}

func BenchmarkIndex200Runs(b *testing.B) {
	store := makeStore(b, 200)
	s, err := New(store)
	must(b, err)
	defer s.Close()
	req := httptest.NewRequest("GET", "/", nil)
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
	}
}

// Every run on the index is a link to its page, named by the run's name, with its time marked as
// UTC for the page's script to show locally, and its findings named.
func TestBrowseIndexLinksRunsAndNamesFindings(t *testing.T) {
	store := makeStore(t, 4)
	s, err := New(store)
	must(t, err)
	defer s.Close()
	_, body := get(t, s, "/")
	if n, links := strings.Count(body, "<tr data-verdict="), strings.Count(body, `<td class="name"><a href="/run/`); n != 4 || links != 4 {
		t.Errorf("%d runs, %d linked by name: want 4 and 4", n, links)
	}
	for _, want := range []string{
		`<a href="/run/single-none/20261122T060300.000Z/">single-none</a>`,
		`<time datetime="2026-11-22T06:03:00.000Z">2026-11-22 06:03:00 UTC</time>`,
		`50 pairs of overlapping holds`,
		`103 of 5103`, // acquires ok, counted
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the index lacks %s", want)
		}
	}
	if strings.Contains(body, "availability") {
		t.Error(`the index says "availability": the measures are "held" and "acquires ok"`)
	}
}

// A run's page says its verdict with the findings named, its plan, links its report and every
// file with its size, and leads back to the index.
func TestBrowseRunPage(t *testing.T) {
	store := makeStore(t, 1)
	s, err := New(store)
	must(t, err)
	defer s.Close()
	dir := "single-restart/20261122T060000.000Z"
	code, body := get(t, s, "/run/"+dir+"/")
	if code != http.StatusOK {
		t.Fatalf("run page: %d", code)
	}
	for _, want := range []string{
		`<span class="v v-invalid">invalid</span> 50 pairs of overlapping holds`,
		`<th>lock</th><td>single</td>`, `<th>nemeses</th><td>restart</td>`, `<th>seed</th><td>9223372036854775808</td>`,
		`<th>lockpick</th><td>v0.0.0-20261126183932-46dafc325a37</td>`,
		`<time datetime="2026-11-22T06:00:00.000Z">`,
		`href="/files/` + dir + `/report.html">Open the report</a>`,
		`<a href="/files/` + dir + `/summary.txt">summary.txt</a></td><td class="num">`,
		`<a href="/">← all runs</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the run page lacks %s", want)
		}
	}
	if strings.Contains(body, "escape.txt") {
		t.Error("the file list shows a link that points out of the store")
	}
	for _, p := range []string{"/run/" + dir + "/../../evil/", "/run/evil/secret.txt/", "/run/matrix/20261122T070000.000Z/", "/run/nothing/here/"} {
		if code, body := get(t, s, p); code == http.StatusOK || strings.Contains(body, secret) {
			t.Errorf("GET %s: %d, want no run page", p, code)
		}
	}
}

func TestBrowseFindingsAndTimes(t *testing.T) {
	r := fakeResult(0)
	r.EarlyLossCount = 1
	if got := strings.Join(findings(r), ", "); got != "50 pairs of overlapping holds, 1 early lease loss" {
		t.Errorf("findings %q", got)
	}
	if got := findings(fakeResult(1)); len(got) != 0 {
		t.Errorf("a valid run has findings %q", got)
	}
	for name, want := range map[string]string{
		"20261126T130959.328Z":   "2026-11-26T13:09:59.328Z",
		"20261126T130959.328Z-2": "2026-11-26T13:09:59.328Z",
	} {
		if got, ok := stampTime(name); !ok || got.Format("2006-01-02T15:04:05.000Z") != want {
			t.Errorf("stampTime(%s) = %v, %v; want %s", name, got, ok, want)
		}
	}
	if _, ok := stampTime("not-a-time"); ok {
		t.Error("stampTime took a name that is no time stamp")
	}
}

// A library card, as lockpick card writes it, is listed with its lock and headline and has a page
// of its own that leads back.
func TestBrowseLibraryCard(t *testing.T) {
	store := makeStore(t, 1)
	dir, err := results.NewRunDir(store, "card-single", time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC))
	must(t, err)
	card := &results.LibraryCard{Lock: "single", Seeds: []uint64{1},
		Started: time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC), Version: "v0.0.0-20261126183932-46dafc325a37"}
	must(t, results.WriteLibraryCard(dir, card))
	s, err := New(store)
	must(t, err)
	defer s.Close()
	_, body := get(t, s, "/")
	if card.Headline == "" || !strings.Contains(body, `<a href="/card/card-single/20261122T080000.000Z/card.md">card single</a> <b>`+card.Headline+`</b>`) {
		t.Error("the index does not list the library card with its lock and headline")
	}
	code, body := get(t, s, "/card/card-single/20261122T080000.000Z/card.md")
	for _, want := range []string{"<h1>lockpick card: single</h1>", "lockpick v0.0.0-20261126183932-46dafc325a37", `<a href="/">`} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("card page (%d) lacks %s", code, want)
		}
	}
}
