package results

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The first screen of a laptop: what a reader sees without scrolling.
const screenW, screenH = 1280, 800

// probeScript measures, after the page has loaded, where the first finding's two holds and its
// fault are drawn, and when the page first painted; it writes both into the DOM that
// chromium --dump-dom prints. It is added to a copy of the report, never to the report itself.
const probeScript = `<script>
window.addEventListener("load", function () { setTimeout(function () {
  var out = { vw: innerWidth, vh: innerHeight, rects: {}, load: performance.now() };
  ["hold-a", "hold-b", "fault"].forEach(function (role) {
    var e = document.querySelector("section.finding [data-role='" + role + "']");
    if (e) { var b = e.getBoundingClientRect(); out.rects[role] = [b.left, b.top, b.right, b.bottom]; }
  });
  out.paint = performance.getEntriesByType("paint").map(function (p) { return [p.name, p.startTime]; });
  var pre = document.createElement("pre"); pre.id = "probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 0); });
</script>`

type probe struct {
	VW, VH float64
	Rects  map[string][4]float64
	Paint  [][2]any
	// Load is when the load event ran, in ms from navigation: the page parsed, laid out, and its
	// timeline drawn (report.js runs before load).
	Load float64
}

// chromium finds a Chromium binary, or skips the test saying how to get one.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: the report's browser test needs it (scripts/install-chromium.sh installs it)")
	return ""
}

func headless(ctx context.Context, bin string, args ...string) *exec.Cmd {
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
		fmt.Sprintf("--window-size=%d,%d", screenW, screenH)}
	return exec.CommandContext(ctx, bin, append(base, args...)...)
}

// measure opens report in headless Chromium at 1280x800 and returns what the probe measured.
func measure(t *testing.T, bin, report string) probe {
	t.Helper()
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	probed := filepath.Join(filepath.Dir(report), "probe.html")
	page := strings.Replace(string(b), "</body>", probeScript+"</body>", 1)
	if err := os.WriteFile(probed, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := headless(ctx, bin, "--dump-dom", "file://"+probed).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	m := regexp.MustCompile(`<pre id="probe">(.*?)</pre>`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("the probe did not run: chromium printed %d bytes without its result", len(out))
	}
	var p probe
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &p); err != nil {
		t.Fatalf("probe result: %v", err)
	}
	return p
}

// A reader who opens a report with a violation sees the two holds and the fault that let the
// second client in without scrolling, on a 1280x800 screen.
func TestReportInBrowser(t *testing.T) {
	bin := chromium(t)
	dir, res := writeRun(t, &synth{clients: 10, duration: 20000 * ms, violation: true}, config(10))
	if res.ViolationCount != 1 {
		t.Fatalf("the synthetic history should hold one violation, got %d", res.ViolationCount)
	}
	p := measure(t, bin, filepath.Join(dir, ReportFile))
	if p.VW != screenW || p.VH != screenH {
		t.Logf("viewport %gx%g (chromium's window decorations); checking against it", p.VW, p.VH)
	}
	for _, role := range []string{"hold-a", "hold-b", "fault"} {
		r, ok := p.Rects[role]
		if !ok {
			t.Errorf("the first violation draws no %s", role)
			continue
		}
		left, top, right, bottom := r[0], r[1], r[2], r[3]
		if right-left < 1 || bottom-top < 1 {
			t.Errorf("%s is drawn %gx%g: invisible", role, right-left, bottom-top)
		}
		if left < 0 || top < 0 || right > p.VW || bottom > p.VH {
			t.Errorf("%s is drawn at [%g,%g]-[%g,%g], outside the first screen %gx%g", role, left, top, right, bottom, p.VW, p.VH)
		}
	}
	t.Logf("first screen %gx%g: %v; paint %v; load %.0fms", p.VW, p.VH, p.Rects, p.Paint, p.Load)

	if src := os.Getenv("LOCKPICK_REPORT"); src != "" {
		// LOCKPICK_REPORT=dir/report.html measures a stored run's report too (the figures in
		// docs/reports.md); its probe copy is written beside it.
		began := time.Now()
		q := measure(t, bin, src)
		t.Logf("%s: %v; paint %v; load %.0fms; chromium took %s", src, q.Rects, q.Paint, q.Load, time.Since(began).Round(time.Millisecond))
	}
	if shot := os.Getenv("LOCKPICK_SCREENSHOT"); shot != "" {
		// LOCKPICK_SCREENSHOT=out.png LOCKPICK_REPORT=dir/report.html: a screenshot of any report.
		src := os.Getenv("LOCKPICK_REPORT")
		if src == "" {
			src = filepath.Join(dir, ReportFile)
		}
		abs, _ := filepath.Abs(shot)
		if out, err := headless(context.Background(), bin, "--screenshot="+abs, "file://"+src).CombinedOutput(); err != nil {
			t.Fatalf("screenshot: %v: %s", err, out)
		}
	}
}
