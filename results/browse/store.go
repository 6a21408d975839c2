package browse

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/results"
)

type cached struct {
	mod  time.Time
	size int64
	run  Run
}

// Run is one stored run as the index shows it.
type Run struct {
	Dir      string // slash path inside the store, e.g. redlock-restart/20261122T061808.379Z
	Name     string
	Started  string    // the directory's time stamp, as stored
	Time     time.Time // Started as a time; zero when the directory is not named by one
	Lock     string
	Nemesis  string
	Workload string
	Seed     uint64
	Version  string // the lockpick that made the run
	// Verdict is valid, invalid or unknown; "unchecked" when results.json is missing (a run in
	// progress, or one killed before its check).
	Verdict string
	// Findings name what made the run invalid ("1 pair of overlapping holds"), or why it is unknown.
	Findings    []string
	Held        float64 // the share of the run's time someone held the lock
	AcquiresOK  float64 // the share of acquires that completed ok
	OK, Total   int     // ok acquires, and every acquire
	Interrupted bool
	HasReport   bool
}

// Card is a report card (store/matrix/<timestamp>/report.md, store/card-LOCK/<timestamp>/card.md,
// or any other markdown page in a directory that is not a run).
type Card struct {
	Path, Kind string
	Time       time.Time
	// Lock and Headline are a library card's (card.json): "UNSAFE under: restart".
	Lock, Headline string
}

// Runs lists the store's runs newest first, and its cards. Summaries are cached by the size and
// modification time of results.json, so a listing reads only what changed since the last one.
func (s *Server) Runs() ([]Run, []Card, error) {
	fsys := s.root.FS()
	names, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, nil, err
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
				cards = append(cards, readCard(fsys, dir, card))
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
		if _, herr := fs.Stat(fsys, dir+"/"+history.FileName); herr == nil {
			return s.readRun(dir, nil), true, ""
		}
		return Run{}, false, cardIn(fsys, dir)
	}
	s.mu.Lock()
	c, ok := s.cache[dir]
	s.mu.Unlock()
	if ok && c.mod.Equal(fi.ModTime()) && c.size == fi.Size() {
		return c.run, true, ""
	}
	doc, _ := readResults(fsys, dir)
	run := s.readRun(dir, doc)
	s.mu.Lock()
	s.cache[dir] = cached{mod: fi.ModTime(), size: fi.Size(), run: run}
	s.mu.Unlock()
	return run, true, ""
}

// readCard describes the card page md in dir, with its lock and headline when it has a card.json.
func readCard(fsys fs.FS, dir, md string) Card {
	kind, stamp, _ := strings.Cut(dir, "/")
	c := Card{Path: dir + "/" + md, Kind: kind}
	c.Time, _ = stampTime(stamp)
	var lc struct{ Lock, Headline string }
	if b, err := fs.ReadFile(fsys, dir+"/"+results.LibraryCardJSON); err == nil && json.Unmarshal(b, &lc) == nil {
		c.Lock, c.Headline = lc.Lock, lc.Headline // without it, the card is listed by its directory alone
	}
	return c
}

func cardIn(fsys fs.FS, dir string) string {
	mds, _ := fs.Glob(fsys, dir+"/*.md")
	if len(mds) == 0 {
		return ""
	}
	for _, name := range []string{results.CardMarkdown, results.LibraryCardMarkdown} {
		if slices.Contains(mds, dir+"/"+name) {
			return name
		}
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

// runConfig is the part of config.json the index shows.
type runConfig struct {
	Lock, Nemesis, Workload, Version string
	Seed                             uint64
}

// readResults reads a run's results.json; nil and an error when it is missing or broken.
func readResults(fsys fs.FS, dir string) (*results.Document, error) {
	b, err := fs.ReadFile(fsys, dir+"/"+results.ResultsFile)
	if err != nil {
		return nil, err
	}
	var doc results.Document
	if err := json.Unmarshal(b, &doc); err != nil || doc.Result == nil {
		return nil, fmt.Errorf("%s/%s is not a result: %v", dir, results.ResultsFile, err)
	}
	return &doc, nil
}

// readRun summarises a run from its config.json and its results (nil: unchecked, or unreadable
// when results.json exists).
func (s *Server) readRun(dir string, doc *results.Document) Run {
	fsys := s.root.FS()
	name, started, _ := strings.Cut(dir, "/")
	r := Run{Dir: dir, Name: name, Started: started, Verdict: "unchecked"}
	r.Time, _ = stampTime(started)
	var cfg runConfig
	if b, err := fs.ReadFile(fsys, dir+"/"+results.ConfigFile); err == nil {
		_ = json.Unmarshal(b, &cfg) // a broken config leaves the columns empty; the files are still served
	}
	r.Lock, r.Nemesis, r.Workload, r.Seed, r.Version = cfg.Lock, cfg.Nemesis, cfg.Workload, cfg.Seed, cfg.Version
	_, err := fs.Stat(fsys, dir+"/"+results.ReportFile)
	r.HasReport = err == nil
	if doc == nil {
		if _, err := fs.Stat(fsys, dir+"/"+results.ResultsFile); err == nil {
			r.Verdict = "unreadable"
		}
		return r
	}
	res := doc.Result
	r.Verdict, r.Findings = res.Valid.String(), findings(res)
	st := res.Stats
	r.Held, r.AcquiresOK, r.OK, r.Total = st.HeldShare, acquiresOK(st.Acquires), st.Acquires.OK, st.Acquires.Total()
	r.Interrupted = doc.Run.Interrupted || doc.Run.Stopped != ""
	return r
}

// stampLayout is how the store names a run's directory (results.NewRunDir), before any "-N" that
// tells apart runs started in the same millisecond.
const stampLayout = "20060102T150405.000Z"

func stampTime(name string) (time.Time, bool) {
	if len(name) > len(stampLayout) {
		name = name[:len(stampLayout)]
	}
	t, err := time.Parse(stampLayout, name)
	return t, err == nil
}

// acquiresOK is the share of acquires that completed ok, from the counts themselves.
func acquiresOK(c checker.Counts) float64 {
	if c.Total() == 0 {
		return 0
	}
	return float64(c.OK) / float64(c.Total())
}
