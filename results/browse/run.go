package browse

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/results"
)

// runPage is what a run's page shows: its verdict and what made it, its plan, its measures, and
// its files.
type runPage struct {
	Store string
	Run
	Result   *checker.Result
	Info     results.RunInfo
	First    string // the first finding, with its time
	Plan     []setting
	Settings []setting // the rest of config.json, folded
	Measures []setting
	Files    []file
	More     int      // files left out of Files
	Links    []string // the run's main files that exist, beside its report
}

type setting struct{ Key, Value string }

type file struct {
	Path string
	Size int64
	Dir  bool
}

// maxFiles bounds a run page's file list; a run writes a few dozen.
const maxFiles = 300

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	dir := strings.TrimSuffix(r.PathValue("path"), "/")
	fsys := s.root.FS()
	if !fs.ValidPath(dir) || strings.Count(dir, "/") != 1 {
		http.NotFound(w, r)
		return
	}
	doc, _ := readResults(fsys, dir) // nil: unchecked or unreadable, as the run's verdict says
	run, isRun, _ := s.entry(dir)
	if !isRun {
		http.NotFound(w, r)
		return
	}
	p := runPage{Store: s.name, Run: run}
	if doc != nil {
		p.Result, p.Info = doc.Result, doc.Run
		if f := doc.Result.FirstFinding; f != nil {
			p.First = fmt.Sprintf("%s at %s: %s", f.Kind, checker.FormatTime(f.At), f.Description)
		}
		p.Measures = measures(doc.Result)
	}
	p.Plan, p.Settings = plan(fsys, dir)
	p.Files, p.More = files(fsys, dir)
	for _, f := range []string{results.SummaryFile, results.ResultsFile, history.FileName} {
		if _, err := fs.Stat(fsys, dir+"/"+f); err == nil {
			p.Links = append(p.Links, f)
		}
	}
	render(w, "run", p)
}

// planKeys are the settings a reader looks for first, in config.json's words, with their labels.
var planKeys = []setting{{"lock", "lock"}, {"library", "library"}, {"workload", "workload"},
	{"nemesis", "nemeses"}, {"seed", "seed"}, {"system", "system"}, {"nodes", "nodes"},
	{"backend", "backend"}, {"clients", "clients"}, {"keys", "keys"}, {"ttl", "ttl"},
	{"time_limit", "time limit"}, {"recovery", "recovery"}, {"version", "lockpick"}, {"command", "command"}}

// plan reads config.json: the settings of planKeys in their order, then every other one.
func plan(fsys fs.FS, dir string) (first, rest []setting) {
	b, err := fs.ReadFile(fsys, dir+"/"+results.ConfigFile)
	var cfg map[string]json.RawMessage
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		return []setting{{"config.json", "missing or unreadable"}}, nil
	}
	for _, k := range planKeys {
		if v, ok := cfg[k.Key]; ok {
			first = append(first, setting{k.Value, plain(v)})
			delete(cfg, k.Key)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		rest = append(rest, setting{strings.ReplaceAll(k, "_", " "), plain(cfg[k])})
	}
	return first, rest
}

// plain is a JSON value as a reader wants it: strings unquoted, lists joined by spaces, a library
// as its name and version.
func plain(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(v, &list) == nil {
		return strings.Join(list, " ")
	}
	var lib struct{ Name, Version, Kind string }
	if json.Unmarshal(v, &lib) == nil && lib.Name != "" {
		return strings.TrimSpace(lib.Name + " " + lib.Version + " (" + lib.Kind + ")")
	}
	return string(v)
}

// measures are the run's figures in the words the report uses.
func measures(r *checker.Result) []setting {
	st := r.Stats
	m := []setting{
		{"held", fmt.Sprintf("%.1f%% of the time (someone held the lock)", 100*st.HeldShare)},
		{"acquires ok", fmt.Sprintf("%d of %d (%.1f%%)", st.Acquires.OK, st.Acquires.Total(), 100*acquiresOK(st.Acquires))},
		{"grants per second", fmt.Sprintf("%.2f", st.GrantsPerSecond)},
		{"fault windows", fmt.Sprint(len(r.Faults))},
	}
	if r.Resource != nil {
		m = append(m, setting{"lock and data", r.Verdicts()})
	}
	if r.DecidedBy != "" {
		m = append(m, setting{"lock level decided by", r.DecidedBy})
	}
	return m
}

// files lists the run's files and directories, depth first, at most maxFiles of them.
func files(fsys fs.FS, dir string) ([]file, int) {
	var out []file
	more := 0
	_ = fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir || !(d.IsDir() || d.Type().IsRegular()) {
			return nil // unreadable entries and links are left out: the server would not serve them
		}
		if len(out) == maxFiles {
			more++
			return nil
		}
		f := file{Path: strings.TrimPrefix(p, dir+"/"), Dir: d.IsDir()}
		if info, err := d.Info(); err == nil && !f.Dir {
			f.Size = info.Size()
		}
		out = append(out, f)
		return nil
	})
	return out, more
}
