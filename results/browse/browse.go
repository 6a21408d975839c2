// Package browse is a small web UI over a run store: the runs newest first with their verdicts,
// filters by lock, nemesis and verdict, each run's report and files, and matrix cards as pages.
//
// Every file is read through an os.Root opened on the store, so no request can reach outside it:
// not with "..", not through a symbolic link that points out.
package browse

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/results"
)

//go:embed pages.html
var pagesFS embed.FS

var pages = template.Must(template.New("pages.html").Funcs(template.FuncMap{
	"pct": func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
}).ParseFS(pagesFS, "pages.html"))

// Server serves the store. Its zero value is not usable; call New.
type Server struct {
	root *os.Root
	name string // the store as the user named it, for page titles
	mux  *http.ServeMux
	md   goldmark.Markdown

	mu    sync.Mutex
	cache map[string]cached // run directory (slash path inside the store) -> its summary
}

type cached struct {
	mod  time.Time
	size int64
	run  Run
}

// Run is one stored run as the index shows it.
type Run struct {
	Dir      string // slash path inside the store, e.g. redlock-restart/20261122T061808.379Z
	Name     string
	Started  string
	Lock     string
	Nemesis  string
	Workload string
	Seed     uint64
	// Verdict is valid, invalid or unknown; "unchecked" when results.json is missing (a run in
	// progress, or one killed before its check).
	Verdict     string
	Violations  int
	LostUpdates int64
	StaleWrites int
	// Findings names what made the run invalid ("1 early lease loss"); Held is the share of the
	// run's time some client held the lock, AcquiresOK the share of acquires granted.
	Findings    string
	Held        float64
	AcquiresOK  float64
	OKAcquires  int
	Interrupted bool
	HasReport   bool
}

// Card is a report card (store/matrix/<timestamp>/report.md, or any other markdown page in a
// directory that is not a run).
type Card struct {
	Path, Title string
}

// New opens store. The store must exist.
func New(store string) (*Server, error) {
	root, err := os.OpenRoot(store)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w (give the directory runs were stored in with --store)", store, err)
	}
	s := &Server{root: root, name: store, cache: map[string]cached{},
		md: goldmark.New(goldmark.WithExtensions(extension.GFM))}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.Handle("GET /files/", http.StripPrefix("/files/", http.FileServerFS(root.FS())))
	s.mux.HandleFunc("GET /card/{path...}", s.card)
	return s, nil
}

// Close releases the store.
func (s *Server) Close() error { return s.root.Close() }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The pages and the stored reports are the store's own; nothing is ever fetched from elsewhere.
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

// Runs lists the store's runs newest first, and its cards. Summaries are cached by the size and
// modification time of results.json, so a listing reads only what changed since the last one.
func (s *Server) Runs() ([]Run, []Card, error) {
	fsys := s.root.FS()
	names, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, nil, fmt.Errorf("read store: %w", err)
	}
	var runs []Run
	var cards []Card
	seen := map[string]bool{}
	for _, n := range names {
		if !n.IsDir() || strings.HasPrefix(n.Name(), ".") {
			continue // "latest" is a link to a run listed under its own name
		}
		stamps, err := fs.ReadDir(fsys, n.Name())
		if err != nil {
			continue
		}
		for _, ts := range stamps {
			if !ts.IsDir() {
				continue
			}
			dir := n.Name() + "/" + ts.Name()
			run, isRun, card := s.entry(dir)
			if isRun {
				runs = append(runs, run)
				seen[dir] = true
			} else if card != "" {
				cards = append(cards, Card{Path: dir + "/" + card, Title: n.Name() + " " + ts.Name()})
			}
		}
	}
	s.forget(seen)
	slices.SortStableFunc(runs, func(a, b Run) int { return strings.Compare(b.Started, a.Started) })
	slices.SortStableFunc(cards, func(a, b Card) int { return strings.Compare(b.Path, a.Path) })
	return runs, cards, nil
}

// entry reads one directory: a run (it has a history or results), or a card directory.
func (s *Server) entry(dir string) (Run, bool, string) {
	fsys := s.root.FS()
	fi, err := fs.Stat(fsys, dir+"/"+results.ResultsFile)
	if err != nil {
		if _, herr := fs.Stat(fsys, dir+"/history.jsonl"); herr == nil {
			return s.readRun(dir, false), true, ""
		}
		return Run{}, false, cardIn(fsys, dir)
	}
	s.mu.Lock()
	c, ok := s.cache[dir]
	s.mu.Unlock()
	if ok && c.mod.Equal(fi.ModTime()) && c.size == fi.Size() {
		return c.run, true, ""
	}
	run := s.readRun(dir, true)
	s.mu.Lock()
	s.cache[dir] = cached{mod: fi.ModTime(), size: fi.Size(), run: run}
	s.mu.Unlock()
	return run, true, ""
}

func cardIn(fsys fs.FS, dir string) string {
	mds, _ := fs.Glob(fsys, dir+"/*.md")
	if len(mds) == 0 {
		return ""
	}
	if slices.Contains(mds, dir+"/"+results.CardMarkdown) {
		return results.CardMarkdown
	}
	return path.Base(mds[0])
}

func (s *Server) forget(seen map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.cache {
		if !seen[k] {
			delete(s.cache, k)
		}
	}
}

// readRun reads the parts of config.json and results.json the index shows.
func (s *Server) readRun(dir string, checked bool) Run {
	name, started, _ := strings.Cut(dir, "/")
	r := Run{Dir: dir, Name: name, Started: started, Verdict: "unchecked"}
	var cfg struct {
		Lock, Nemesis, Workload string
		Seed                    uint64
	}
	if b, err := fs.ReadFile(s.root.FS(), dir+"/config.json"); err == nil {
		_ = json.Unmarshal(b, &cfg) // a broken config leaves the columns empty; the files are still served
	}
	r.Lock, r.Nemesis, r.Workload, r.Seed = cfg.Lock, cfg.Nemesis, cfg.Workload, cfg.Seed
	_, err := fs.Stat(s.root.FS(), dir+"/report.html")
	r.HasReport = err == nil
	if !checked {
		return r
	}
	var doc struct {
		checker.Result
		Run struct {
			Interrupted bool `json:"interrupted"`
		} `json:"run"`
	}
	b, err := fs.ReadFile(s.root.FS(), dir+"/results.json")
	if err != nil || json.Unmarshal(b, &doc) != nil {
		r.Verdict = "unreadable"
		return r
	}
	st := doc.Stats
	r.Verdict, r.Violations, r.Findings = doc.Valid.String(), doc.ViolationCount, checker.Phrases(doc.Tallies())
	r.Held, r.OKAcquires, r.Interrupted = st.HeldShare, st.Acquires.OK, doc.Run.Interrupted
	if n := st.Acquires.Total(); n > 0 {
		r.AcquiresOK = float64(st.Acquires.OK) / float64(n) // from the counts, so older stores show it too
	}
	if doc.Resource != nil {
		r.LostUpdates, r.StaleWrites = doc.Resource.LostUpdates, doc.Resource.StaleWriteCount
	}
	return r
}

// indexPage is what the index template shows.
type indexPage struct {
	Store                    string
	Runs                     []Run
	Total                    int
	Cards                    []Card
	Locks, Nemeses, Verdicts []string
	Lock, Nemesis, Verdict   string
	Counts                   map[string]int
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	runs, cards, err := s.Runs()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	q := r.URL.Query()
	p := indexPage{Store: s.name, Total: len(runs), Cards: cards, Counts: map[string]int{},
		Lock: q.Get("lock"), Nemesis: q.Get("nemesis"), Verdict: q.Get("verdict")}
	for _, run := range runs {
		p.Locks = addUnique(p.Locks, run.Lock)
		p.Nemeses = addUnique(p.Nemeses, run.Nemesis)
		p.Verdicts = addUnique(p.Verdicts, run.Verdict)
		if (p.Lock == "" || run.Lock == p.Lock) && (p.Nemesis == "" || run.Nemesis == p.Nemesis) && (p.Verdict == "" || run.Verdict == p.Verdict) {
			p.Runs = append(p.Runs, run)
			p.Counts[run.Verdict]++
		}
	}
	slices.Sort(p.Locks)
	slices.Sort(p.Nemeses)
	slices.Sort(p.Verdicts)
	render(w, "index", p)
}

func addUnique(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// runDirRef finds run directories named in a card ("store/redlock-restart/20261122T061808.379Z").
var runDirRef = regexp.MustCompile(`(?:[^\s<>"]*/)?([A-Za-z0-9._-]+/\d{8}T\d{6}\.\d{3}Z(?:-\d+)?)`)

func (s *Server) card(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("path")
	if !strings.HasSuffix(p, ".md") || !fs.ValidPath(p) {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(s.root.FS(), p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			http.NotFound(w, r)
		} else {
			http.Error(w, "cannot read "+p, http.StatusForbidden)
		}
		return
	}
	var out bytes.Buffer
	if err := s.md.Convert(b, &out); err != nil {
		http.Error(w, "cannot render "+p, http.StatusInternalServerError)
		return
	}
	// goldmark escapes raw HTML by default (no WithUnsafe), so the card cannot inject markup; run
	// directories it names become links to their reports.
	html := runDirRef.ReplaceAllStringFunc(out.String(), func(m string) string {
		rel := runDirRef.FindStringSubmatch(m)[1]
		if _, err := fs.Stat(s.root.FS(), rel+"/report.html"); err != nil {
			return m
		}
		return `<a href="/files/` + template.HTMLEscapeString(rel) + `/report.html">` + m + `</a>`
	})
	render(w, "card", struct {
		Title string
		Body  template.HTML
	}{Title: p, Body: template.HTML(html)})
}

func render(w http.ResponseWriter, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		slog.Error("render page", "page", name, "err", err)
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}
