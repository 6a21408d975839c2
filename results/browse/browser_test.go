package browse

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/results"
)

// readerZone is the time zone the browser runs in: far from UTC, so a time left in UTC shows.
const readerZone = "Asia/Tokyo"

// pageProbe measures a page after it loaded and writes the result into the DOM that chromium
// --dump-dom prints. The test's server adds it to pages asked for with ?probe=1, never otherwise.
const pageProbe = `<script>
window.addEventListener("load", function () { setTimeout(function () {
  var vw = innerWidth, out = { vw: vw, scrollW: document.documentElement.scrollWidth, rows: 0, linked: [],
    times: [], tz: "", back: !!document.querySelector("header a[href='/']"),
    report: !!document.querySelector("a[href$='/report.html']"), verdict: "", sizes: 0 };
  document.querySelectorAll("table.runs tbody tr[data-verdict]").forEach(function (tr) {
    out.rows++;
    var a = tr.querySelector("a[href^='/run/']");
    if (!a) return;
    var b = a.getBoundingClientRect();
    if (b.width > 0 && b.left >= 0 && b.right <= vw) out.linked.push(a.textContent);
  });
  document.querySelectorAll("time[datetime]").forEach(function (t) { out.times.push(t.textContent); });
  var tz = document.getElementById("tz"); if (tz) out.tz = tz.textContent;
  var v = document.querySelector(".verdict-box .head"); if (v) out.verdict = v.textContent;
  document.querySelectorAll("table.files td.num").forEach(function (td) { if (/\d+ [kMG]?B$/.test(td.textContent)) out.sizes++; });
  var pre = document.createElement("pre"); pre.id = "probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 0); });
</script>`

type pageMeasure struct {
	VW, ScrollW float64
	Rows        int
	Linked      []string
	Times       []string
	TZ          string
	Back        bool
	Report      bool
	Verdict     string
	Sizes       int
}

func findChromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: the store browser's browser test needs it (make browser installs it)")
	return ""
}

// chrome runs headless Chromium at width x 900 in the reader's time zone.
func chrome(t *testing.T, bin string, width int, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
		fmt.Sprintf("--window-size=%d,900", width)}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	cmd.Env = append(os.Environ(), "TZ="+readerZone)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return out
}

// withProbe serves h, adding pageProbe to the HTML pages asked for with ?probe=1.
func withProbe(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("probe") == "" {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		hdr := w.Header()
		for k, v := range rec.Header() {
			hdr[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write([]byte(strings.Replace(rec.Body.String(), "</body>", pageProbe+"</body>", 1)))
	})
}

func measurePage(t *testing.T, bin, url string, width int) pageMeasure {
	t.Helper()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	out := chrome(t, bin, width, "--dump-dom", url+sep+"probe=1")
	m := regexp.MustCompile(`<pre id="probe">(.*?)</pre>`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s: the probe did not run (%d bytes of DOM)", url, len(out))
	}
	var p pageMeasure
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &p); err != nil {
		t.Fatalf("%s: probe result: %v", url, err)
	}
	return p
}

// browserStore is makeStore's runs, plus one whose name and nemeses are as long as a scenario's.
func browserStore(t *testing.T) string {
	store := makeStore(t, 9)
	dir, err := results.NewRunDir(store, "sentinel-fenced-restart+partition+clock-forward-counter-fenced",
		time.Date(2026, 11, 22, 7, 30, 0, 0, time.UTC))
	must(t, err)
	must(t, results.WriteJSON(dir, results.ConfigFile, map[string]any{"lock": "sentinel-fenced", "workload": "counter",
		"nemesis": "restart,partition,clock-forward,latency,client-pause", "seed": uint64(18446744073709551615)}))
	res := fakeResult(3)
	must(t, results.WriteJSON(dir, results.ResultsFile, results.Document{Result: res, Run: results.RunInfo{Dir: dir}}))
	must(t, os.WriteFile(filepath.Join(dir, results.ReportFile), []byte("<html>report</html>"), 0o644))
	return store
}

// The store browser in a real browser: at 1400 px and at 800 px the index fits the window, every
// run is a link by its name that lies on screen, and times are shown in the reader's time zone; a
// run's page fits, names its findings, links its report and the index, and lists its files with
// sizes; a card's page fits and leads back. Screenshots of each are kept in the directory the log
// names (LOCKPICK_SCREENSHOTS chooses it).
func TestBrowseInBrowser(t *testing.T) {
	bin := findChromium(t)
	s, err := New(browserStore(t))
	must(t, err)
	defer s.Close()
	srv := httptest.NewServer(withProbe(s))
	defer srv.Close()
	shots := screenshotDir(t)
	run := "single-restart/20261122T060000.000Z"
	pages := []struct {
		name, path string
		width      int
	}{
		{"index-1400", "/", 1400},
		{"index-800", "/", 800},
		{"run-1400", "/run/" + run + "/", 1400},
		{"card-1400", "/card/matrix/20261122T070000.000Z/report.md", 1400},
	}
	for _, pg := range pages {
		p := measurePage(t, bin, srv.URL+pg.path, pg.width)
		t.Logf("%s: viewport %g, page %g wide, %d rows, %d linked on screen, times %q, %q", pg.name, p.VW, p.ScrollW, p.Rows, len(p.Linked), first(p.Times, 2), p.TZ)
		if p.ScrollW > p.VW {
			t.Errorf("%s: the page is %g px wide in a %g px window: it overflows", pg.name, p.ScrollW, p.VW)
		}
		if !p.Back {
			t.Errorf("%s: no link back to the index in the header", pg.name)
		}
		checkTimes(t, pg.name, p)
		switch {
		case strings.HasPrefix(pg.name, "index"):
			if p.Rows != 10 || len(p.Linked) != p.Rows {
				t.Errorf("%s: %d runs, %d of them linked by name on screen (%q): want every one of 10", pg.name, p.Rows, len(p.Linked), p.Linked)
			}
		case strings.HasPrefix(pg.name, "run"):
			if !strings.Contains(p.Verdict, "invalid") || !strings.Contains(p.Verdict, "50 pairs of overlapping holds") {
				t.Errorf("%s: verdict %q, want invalid with its findings named", pg.name, p.Verdict)
			}
			if !p.Report || p.Sizes < 4 {
				t.Errorf("%s: report linked %v, %d file sizes: want the report and every file's size", pg.name, p.Report, p.Sizes)
			}
		}
		chrome(t, bin, pg.width, "--screenshot="+filepath.Join(shots, pg.name+".png"), srv.URL+pg.path)
	}
	t.Logf("screenshots in %s", shots)
}

// checkTimes: every time is shown in the reader's zone, by the page's script, not as stored.
func checkTimes(t *testing.T, page string, p pageMeasure) {
	t.Helper()
	if len(p.Times) == 0 {
		t.Errorf("%s: no times", page)
	}
	if !strings.Contains(p.TZ, readerZone) {
		t.Errorf("%s: the header says %q, want the reader's zone %s named", page, p.TZ, readerZone)
	}
	raw := regexp.MustCompile(`\d{8}T\d{6}|UTC`)
	for _, tm := range p.Times {
		if raw.MatchString(tm) || tm == "" {
			t.Errorf("%s: time %q is not in the reader's zone", page, tm)
			break
		}
	}
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

func screenshotDir(t *testing.T) string {
	if d := os.Getenv("LOCKPICK_SCREENSHOTS"); d != "" {
		must(t, os.MkdirAll(d, 0o755))
		return d
	}
	d, err := os.MkdirTemp("", "lockpick-serve-screenshots-")
	must(t, err)
	return d
}
