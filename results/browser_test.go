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
	"slices"
	"strings"
	"testing"
	"time"
)

// The first screen of a laptop: what a reader sees without scrolling.
const screenW, screenH = 1400, 900

// probeScript measures, after the page has loaded, where the whole-run timeline and the first
// finding's two holds and fault are drawn, and when the page first painted; then it opens every
// folded part and measures every finding's drawing (labels that overlap or are clipped, fault
// windows too thin to see) and the whole-run canvas's last draw (report.js keeps its boxes on the
// canvas). It writes all of it into the DOM that chromium --dump-dom prints. It is added to a copy
// of the report, never to the report itself.
const probeScript = `<script>
window.addEventListener("load", function () { setTimeout(function () {
  var MIN = ` + "minDrawnFault" + `;
  function box(e) { var b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; }
  // Two boxes collide when they share more than half a pixel each way.
  function hits(a, b) { return Math.min(a[2], b[2]) - Math.max(a[0], b[0]) > 0.5 && Math.min(a[3], b[3]) - Math.max(a[1], b[1]) > 0.5; }
  function outside(a, w, h) { return a[0] < -0.5 || a[1] < -0.5 || a[2] > w + 0.5 || a[3] > h + 0.5; }
  var out = { vw: innerWidth, vh: innerHeight, rects: {}, load: performance.now() };
  ["hold-a", "hold-b", "fault"].forEach(function (role) {
    var e = document.querySelector("section.finding [data-role='" + role + "']");
    if (e) out.rects[role] = box(e);
  });
  var tl = document.querySelector("#whole-run canvas.tl");
  if (tl) out.rects.timeline = box(tl);
  out.paint = performance.getEntriesByType("paint").map(function (p) { return [p.name, p.startTime]; });
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  var f = out.findings = { drawings: 0, labels: 0, faults: 0, overlaps: [], clipped: [], thin: [] };
  document.querySelectorAll("svg.finding-tl").forEach(function (svg) {
    f.drawings++;
    var sb = box(svg), name = svg.getAttribute("data-finding");
    var texts = Array.prototype.map.call(svg.querySelectorAll("text"), function (t) {
      var b = box(t); return { t: t.textContent, b: [b[0] - sb[0], b[1] - sb[1], b[2] - sb[0], b[3] - sb[1]] };
    });
    f.labels += texts.length;
    texts.forEach(function (a, i) {
      if (outside(a.b, sb[2] - sb[0], sb[3] - sb[1])) f.clipped.push(name + ": " + JSON.stringify(a.t) + " at " + a.b.map(Math.round));
      for (var j = i + 1; j < texts.length; j++)
        if (hits(a.b, texts[j].b)) f.overlaps.push(name + ": " + JSON.stringify(a.t) + " and " + JSON.stringify(texts[j].t));
    });
    svg.querySelectorAll("[data-role='fault']").forEach(function (r) {
      f.faults++;
      var w = r.getBoundingClientRect().width;
      if (w < MIN) f.thin.push(name + ": " + w.toFixed(1) + "px");
    });
  });
  var c = out.canvas = { labels: 0, faults: 0, overlaps: [], clipped: [], thin: [] }, d = tl && tl.drawn;
  if (d) {
    var cw = tl.clientWidth, ch = tl.clientHeight;
    c.labels = d.labels.length; c.faults = d.faults.length;
    d.labels.forEach(function (a, i) {
      if (outside(a, cw, ch)) c.clipped.push(JSON.stringify(a[4]) + " at " + a.slice(0, 4).map(Math.round));
      for (var j = i + 1; j < d.labels.length; j++) if (hits(a, d.labels[j])) c.overlaps.push(JSON.stringify(a[4]) + " and " + JSON.stringify(d.labels[j][4]));
    });
    d.faults.forEach(function (r) { if (r[2] - r[0] < MIN) c.thin.push((r[2] - r[0]).toFixed(1) + "px at x=" + Math.round(r[0])); });
  }
  var ax = document.querySelector("#whole-run canvas.tl-axis"), a = ax && ax.drawn;
  if (a) {
    c.labels += a.length;
    a.forEach(function (l, i) {
      if (outside(l, ax.clientWidth, ax.clientHeight)) c.clipped.push("axis " + JSON.stringify(l[4]) + " at " + l.slice(0, 4).map(Math.round));
      for (var j = i + 1; j < a.length; j++) if (hits(l, a[j])) c.overlaps.push("axis " + JSON.stringify(l[4]) + " and " + JSON.stringify(a[j][4]));
    });
  }
  var pre = document.createElement("pre"); pre.id = "probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 0); });
</script>`

// minDrawnFault is the narrowest a fault window may be drawn, in CSS pixels, anywhere on the page.
const minDrawnFault = 5

type probe struct {
	VW, VH float64
	Rects  map[string][4]float64
	Paint  [][2]any
	// Load is when the load event ran, in ms from navigation: the page parsed, laid out, and its
	// timeline drawn (report.js runs before load).
	Load float64
	// Findings are the drawings of the findings (SVG), Canvas the whole-run timeline.
	Findings, Canvas drawing
}

// drawing is what the probe found wrong in one kind of drawing, with how much it looked at.
type drawing struct {
	Drawings, Labels, Faults int
	Overlaps, Clipped, Thin  []string
}

// problems lists what is wrong with d, named by where.
func (d drawing) problems(where string) []string {
	var out []string
	for _, o := range d.Overlaps {
		out = append(out, where+": labels overlap: "+o)
	}
	for _, c := range d.Clipped {
		out = append(out, where+": label clipped: "+c)
	}
	for _, th := range d.Thin {
		out = append(out, fmt.Sprintf("%s: fault window drawn %s wide, under %dpx", where, th, minDrawnFault))
	}
	return out
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

// measure opens report in headless Chromium at 1400x900 and returns what the probe measured.
func measure(t *testing.T, bin, report string) probe {
	t.Helper()
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	probed := filepath.Join(filepath.Dir(report), "probe.html")
	script := strings.Replace(probeScript, "minDrawnFault", fmt.Sprint(minDrawnFault), 1)
	page := strings.Replace(string(b), "</body>", script+"</body>", 1)
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

// A reader who opens a report with fifteen violations sees the whole run first, and, still on the
// first screen of 1400x900, the first violation's two holds and the fault that let the second
// client in; the other violations are folded below it. Opened, every drawing on the page has labels
// that neither overlap nor run off its edge, and fault windows wide enough to see, however short
// the fault (the synthetic run's later restarts last half a millisecond).
func TestReportInBrowser(t *testing.T) {
	bin := chromium(t)
	const violations = 15
	dir, res := writeRun(t, &synth{clients: 10, duration: 20000 * ms, violations: violations}, config(10))
	if res.ViolationCount != violations {
		t.Fatalf("the synthetic history should hold %d violations, got %d", violations, res.ViolationCount)
	}
	p := measure(t, bin, filepath.Join(dir, ReportFile))
	if p.VW != screenW || p.VH != screenH {
		t.Logf("viewport %gx%g (chromium's window decorations); checking against it", p.VW, p.VH)
	}
	if tl, ok := p.Rects["timeline"]; !ok {
		t.Error("the page has no whole-run timeline")
	} else if seen := min(tl[3], p.VH) - tl[1]; tl[1] < 0 || seen < min(150, tl[3]-tl[1]) {
		t.Errorf("the whole-run timeline is drawn from %gpx down, %gpx of it on the first screen %gx%g: it should lead the page", tl[1], seen, p.VW, p.VH)
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
	// Each check must have had something to look at, or it proves nothing.
	if p.Findings.Drawings < violations || p.Findings.Faults < violations || p.Findings.Labels < 10*violations {
		t.Errorf("measured %d drawings with %d labels and %d fault windows: want one drawing per violation, each with its labels and fault", p.Findings.Drawings, p.Findings.Labels, p.Findings.Faults)
	}
	if p.Canvas.Labels < 10 || p.Canvas.Faults < violations {
		t.Errorf("the whole-run canvas reported %d labels and %d fault windows: want its lane labels and a window per restart", p.Canvas.Labels, p.Canvas.Faults)
	}
	for _, pr := range slices.Concat(p.Findings.problems("findings"), p.Canvas.problems("whole run")) {
		t.Error(pr)
	}
	t.Logf("first screen %gx%g: %v; paint %v; load %.0fms; measured %d drawings (%d labels, %d fault windows), canvas %d labels, %d fault windows",
		p.VW, p.VH, p.Rects, p.Paint, p.Load, p.Findings.Drawings, p.Findings.Labels, p.Findings.Faults, p.Canvas.Labels, p.Canvas.Faults)

	if src := os.Getenv("LOCKPICK_REPORT"); src != "" {
		// LOCKPICK_REPORT=dir/report.html measures a stored run's report too (the figures in
		// docs/reports.md); its probe copy is written beside it.
		began := time.Now()
		q := measure(t, bin, src)
		t.Logf("%s: %v; paint %v; load %.0fms; chromium took %s; problems: %q", src, q.Rects, q.Paint, q.Load, time.Since(began).Round(time.Millisecond),
			slices.Concat(q.Findings.problems("findings"), q.Canvas.problems("whole run")))
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
