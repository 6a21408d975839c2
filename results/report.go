package results

import (
	"bytes"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
)

// ReportFile is the run's page for people: self-contained (inline CSS, script, SVG and images),
// so it opens from the file system with no network.
const ReportFile = "report.html"

//go:embed assets/report.html assets/report.css assets/report.js
var assets embed.FS

var reportTemplate = template.Must(template.New("report.html").Funcs(template.FuncMap{
	"verdictClass": func(v checker.Verdict) string { return v.String() },
}).ParseFS(assets, "assets/report.html"))

// kv is one labelled value of the header.
type kv struct {
	Key, Value string
	// Class marks a value the reader should notice ("bad", "warn").
	Class string
}

// reportPage is everything report.html shows.
type reportPage struct {
	Title       string
	Verdict     checker.Verdict
	VerdictWord string
	Verdicts    string
	Meta        []kv
	// Why says, under the verdict, why a verdict is unknown.
	Why      string
	Evidence []kv
	// First is the first finding, drawn right after the whole run; Rest are the others, folded
	// behind RestSummary, with MoreViolations: the violations without a timeline of their own.
	First          *findingView
	Rest           []findingView
	RestSummary    string
	MoreViolations []string
	Problems       []string
	Timeline       template.JS
	TimelineNotes  []string
	Plots          []plotView
	Faults         []string
	Overruns       []string
	OverrunCount   int
	Lost           []string
	Notes          []string
	Files          []kv
	Summary        string
	CSS            template.CSS
	JS             template.JS
}

type findingView struct {
	finding
	SVG template.HTML
}

type plotView struct {
	Title, Caption, File string
	Src                  template.URL
}

// WriteReport writes report.html and the plot images into the run directory dir, from the checked
// result and the run's history and configuration stored there.
func WriteReport(dir string, res *checker.Result, info RunInfo) error {
	d, err := readRunData(dir, res)
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return writeReport(dir, res, info, d)
}

// writeReport writes report.html and the plot images of d, gathered from the run's history.
func writeReport(dir string, res *checker.Result, info RunInfo, d *runData) error {
	plots, err := writePlots(dir, res, d)
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	var buf bytes.Buffer
	if err := renderReport(&buf, dir, res, info, d, plots); err != nil {
		return err
	}
	// Written beside and renamed, so a reader never opens half a page.
	tmp := filepath.Join(dir, "."+ReportFile+".tmp")
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ReportFile)); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

func renderReport(buf *bytes.Buffer, dir string, res *checker.Result, info RunInfo, d *runData, plots []plotImage) error {
	css, err := assets.ReadFile("assets/report.css")
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	js, err := assets.ReadFile("assets/report.js")
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	tlData := timelineData(res, d)
	tl, err := json.Marshal(tlData)
	if err != nil {
		return fmt.Errorf("write report: encode timeline: %w", err)
	}
	p := reportPage{
		Verdict: res.Valid, VerdictWord: strings.ToUpper(res.Valid.String()), Verdicts: res.Verdicts(),
		Meta: metaRows(d.meta, info, res), Evidence: evidenceRows(res),
		Timeline: template.JS(tl), CSS: template.CSS(css), JS: template.JS(js),
		Faults: faultLines(res.Faults), OverrunCount: res.OverrunCount,
		Notes: slices.Concat(res.Notes, info.Errors), Files: fileLinks(dir, res.Resource != nil), Summary: res.Summary(),
	}
	p.Title = fmt.Sprintf("%s under %s: %s", orDash(d.meta.Lock), orDash(d.meta.Nemesis), res.Valid)
	p.Why = res.UnknownReason
	p.foldFindings(res, d)
	p.Problems = problemLines(res, info)
	for _, o := range res.Overruns {
		p.Overruns = append(p.Overruns, o.Description)
	}
	for _, l := range d.lostUpdates() {
		p.Lost = append(p.Lost, fmt.Sprintf("%s at %s", l.text(), checker.FormatTime(l.w.inv)))
	}
	p.TimelineNotes = tlData.Notes
	for _, pl := range plots {
		p.Plots = append(p.Plots, plotView{Title: pl.Title, Caption: pl.Caption, File: pl.File,
			Src: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(pl.PNG))})
	}
	if err := reportTemplate.Execute(buf, p); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// foldFindings puts the first finding on the first screen and folds the others behind one line
// that counts them: a run with fifteen violations reads like a run with one until it is opened.
func (p *reportPage) foldFindings(res *checker.Result, d *runData) {
	var violations, stale int
	for i, f := range findings(res, d) {
		v := findingView{finding: f, SVG: timelineSVG(f)}
		if i == 0 {
			p.First = &v
			continue
		}
		p.Rest = append(p.Rest, v)
		if f.Kind == "violation" {
			violations++
		} else {
			stale++
		}
	}
	for i, v := range res.Violations {
		if i >= maxViolationTimelines {
			p.MoreViolations = append(p.MoreViolations, v.Description)
		}
	}
	var parts []string
	if n := violations + len(p.MoreViolations); n > 0 {
		parts = append(parts, plural(n, "more violation", "more violations"))
	}
	if stale > 0 {
		parts = append(parts, plural(stale, "more stale write", "more stale writes"))
	}
	p.RestSummary = strings.Join(parts, " and ")
	if len(p.MoreViolations) > 0 {
		p.RestSummary += fmt.Sprintf(" (%d drawn, %d listed)", violations+stale, len(p.MoreViolations))
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func metaRows(m runMeta, info RunInfo, res *checker.Result) []kv {
	rows := []kv{
		{Key: "lock", Value: orDash(m.Lock)},
		{Key: "workload", Value: orDash(m.Workload)},
		{Key: "nemeses", Value: orDash(m.Nemesis)},
		{Key: "seed", Value: fmt.Sprint(m.Seed)},
		{Key: "lockpick", Value: harnessVersion(m.Version, m.Revision)},
		{Key: "clients", Value: fmt.Sprint(m.Clients)},
		{Key: "keys", Value: fmt.Sprint(m.Keys)},
		{Key: "ttl", Value: time.Duration(m.TTL).String()},
	}
	if m.Guard != "" {
		rows = append(rows, kv{Key: "guard", Value: m.Guard})
	}
	if m.Nodes > 0 {
		rows = append(rows, kv{Key: "nodes", Value: fmt.Sprint(m.Nodes)})
	}
	if m.Etcd != nil {
		rows = append(rows, kv{Key: "etcd", Value: m.Etcd.Version + " (" + m.Etcd.Path + ")"})
	}
	// The library the run tested: the harness's word (results.json), else config.json's.
	lib := info.Library
	if lib == nil {
		lib = m.Library
	}
	if lib != nil {
		rows = append(rows, kv{Key: "library", Value: lib.String()})
		for _, n := range lib.Notes {
			rows = append(rows, kv{Key: "library note", Value: n})
		}
	}
	return append(rows, kv{Key: "started", Value: m.Started})
}

// evidenceRows say how much the run exercised the lock: what a valid verdict rests on. The
// checker's own judgement comes first (its rules, why an unknown verdict is unknown, which analysis
// decided), then the counts a reader checks it against.
func evidenceRows(res *checker.Result) []kv {
	s := res.Stats
	var rows []kv
	if res.UnknownReason != "" {
		rows = append(rows, kv{Key: "unknown because", Value: res.UnknownReason, Class: "bad"})
	}
	class := ""
	if !res.Evidence.Enough {
		class = "bad"
	}
	for i, line := range res.Evidence.Lines() {
		key := ""
		if i == 0 {
			key = "evidence"
		}
		rows = append(rows, kv{Key: key, Value: line, Class: class})
	}
	if lv := res.Liveness; lv != nil {
		text, cls := lv.Verdict, ""
		switch lv.Verdict {
		case checker.LiveUnknown:
			text += ": " + lv.Note
		case checker.LiveDeadlock:
			text, cls = fmt.Sprintf("deadlock: %d keys stayed taken after the last heal at %s", len(lv.Findings), checker.FormatTime(lv.Since)), "bad"
		case checker.LiveUnavailable:
			text = fmt.Sprintf("unavailable: %d keys refused after the last heal at %s", len(lv.Findings), checker.FormatTime(lv.Since))
		}
		rows = append(rows, kv{Key: "liveness", Value: text, Class: cls})
	}
	var perKey []string
	for _, k := range slices.Sorted(maps.Keys(s.AcquiresByKey)) {
		perKey = append(perKey, fmt.Sprintf("%s %d", k, s.AcquiresByKey[k].OK))
	}
	rows = append(rows,
		kv{Key: "ok acquires per key", Value: orDash(strings.Join(perKey, ", "))},
		kv{Key: "acquires", Value: fmt.Sprintf("%d ok, %d refused because held, %d failed with an error, %d timed out, %d pending",
			s.Acquires.OK, s.Acquires.Held, s.Acquires.Fail-s.Acquires.Held, s.Acquires.Info, s.Acquires.Pending)},
		kv{Key: "held", Value: fmt.Sprintf("%.1f%% of the time, %.2f grants/s", 100*s.HeldShare, s.GrantsPerSecond)},
		kv{Key: "acquires ok", Value: fmt.Sprintf("%.1f%% of acquires granted, error share %.1f%%", 100*s.AcquiresOKShare, 100*s.ErrorShare)},
		kv{Key: "ok inside faults", Value: fmt.Sprintf("%d (%d asked and granted while a fault was surely in effect)", s.OKInFaults, s.OKWhollyInFaults)},
		kv{Key: "decided by", Value: fmt.Sprintf("%s (porcupine %s on %d segments), checked in %s", res.DecidedBy, res.Porcupine, res.Segments, res.CheckDuration.Round(time.Millisecond))})
	return rows
}

// problemLines are the findings without a timeline: token regressions, the data-level counts,
// checker errors.
func problemLines(res *checker.Result, info RunInfo) []string {
	var out []string
	for _, e := range res.Errors {
		out = append(out, "checker error: "+e)
	}
	for _, t := range res.TokenRegressions {
		out = append(out, "token regression: "+t.Description)
	}
	for _, l := range res.EarlyLosses {
		out = append(out, "early lease loss: "+l.Description)
	}
	for _, l := range res.LateExtends {
		out = append(out, l.Kind()+": "+l.Description)
	}
	if ce := res.ClientExits; ce != nil {
		out = append(out, "client crashes: "+ce.Headline())
		for i, d := range ce.Deaths {
			if i == maxClientExitLines {
				out = append(out, fmt.Sprintf("client crash: ... and %d more (results.json lists %d)", ce.Count-i, len(ce.Deaths)))
				break
			}
			out = append(out, "client crash: "+d.Description())
		}
	}
	for _, u := range res.Culprits {
		out = append(out, "culprit ("+u.Kind+", a warning): "+u.Description)
	}
	if lv := res.Liveness; lv != nil {
		for _, f := range lv.Findings {
			out = append(out, "liveness, "+f.Kind+": "+f.Description)
		}
	}
	if rr := res.Resource; rr != nil {
		if rr.HasFinal {
			out = append(out, fmt.Sprintf("counter (guard %s): %d → %d after %d accepted increments: %d lost updates", rr.Guard, rr.Initial, rr.Final, rr.Writes.OK, rr.LostUpdates))
		}
		for i, sw := range rr.StaleWrites {
			if i >= maxStaleTimelines {
				out = append(out, "stale write: "+sw.Description)
			}
		}
		for _, e := range rr.Errors {
			out = append(out, "data checker error: "+e)
		}
	}
	if info.Interrupted {
		out = append(out, "the run was interrupted; this verdict covers the history recorded until then")
	}
	return out
}

// maxClientExitLines is how many client program deaths the report lists one by one.
const maxClientExitLines = 10

func faultLines(fs []checker.FaultWindow) []string {
	var out []string
	for _, f := range fs {
		s := fmt.Sprintf("%s %s [%s, %s]", faultName(f), strings.Join(f.Nodes, " "), checker.FormatTime(f.Start), checker.FormatTime(f.End))
		if !f.Healed {
			s += " (not healed)"
		}
		out = append(out, s)
	}
	return out
}

// fileLinks are the run's files a reader may want, relative to the report.
func fileLinks(dir string, resource bool) []kv {
	var out []kv
	for _, f := range []struct{ name, what string }{
		{SummaryFile, "the verdict in text"},
		{ResultsFile, "the verdict and evidence as JSON"},
		{history.FileName, "every event"},
		{VisualizationFile, "porcupine's page of the lock model"},
		{ResourceVisualizationFile, "porcupine's page of the counter model"},
		{ConfigFile, "the resolved configuration"},
		{ScheduleFile, "the nemesis plan drawn from the seed"},
		{LatencyPlotFile, "plot"}, {RatePlotFile, "plot"}, {ClockPlotFile, "plot"},
	} {
		// resource.html is written after the report (results.Write), so it is known from the result.
		_, err := os.Stat(filepath.Join(dir, f.name))
		if err == nil || (f.name == ResourceVisualizationFile && resource) {
			out = append(out, kv{Key: f.name, Value: f.what})
		}
	}
	return out
}

func shortRev(r string) string {
	// A full git hash (with -dirty, from the Makefile) is shortened as git shows it.
	if len(r) >= 40 {
		return r[:12] + r[40:]
	}
	return orDash(r)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
