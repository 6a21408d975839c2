// Package results is the run store: one self-contained directory per run, holding its configuration,
// its history, its verdict and its reports.
//
//	store/<name>/<timestamp>/
//	  config.json         the resolved configuration, seed and git revision
//	  schedule.json       the nemesis plan drawn from the seed
//	  history.jsonl       every event, streamed while the run goes on
//	  results.json        the verdict (top-level "valid": true, false or "unknown"), violations, statistics
//	  summary.txt         the same for people
//	  linearizability.html  porcupine's visualization, with fault windows
//	  resource.html       the counter workload's data-level visualization (counter runs only)
//	  nodes/n1/redis.log  each node's data and log
//	store/latest -> <name>/<timestamp>
package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
)

// File names inside a run directory.
const (
	ConfigFile        = "config.json"
	ScheduleFile      = "schedule.json"
	ResultsFile       = "results.json"
	SummaryFile       = "summary.txt"
	VisualizationFile = "linearizability.html"
	// ResourceVisualizationFile is the counter workload's data-level page.
	ResourceVisualizationFile = "resource.html"
	NodesDir                  = "nodes"
)

// NewRunDir creates store/name/<timestamp> and returns its path. It fails with an error that names
// the fix when the store cannot be written.
func NewRunDir(store, name string, now time.Time) (string, error) {
	if err := os.MkdirAll(store, 0o755); err != nil {
		return "", fmt.Errorf("cannot create store %s: %w (choose a writable directory with --store)", store, err)
	}
	probe, err := os.CreateTemp(store, ".write-test-*")
	if err != nil {
		return "", fmt.Errorf("store %s is not writable: %w (choose a writable directory with --store)", store, errors.Unwrap(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	base := filepath.Join(store, name, now.UTC().Format("20060102T150405.000Z"))
	dir := base
	for i := 1; ; i++ {
		err := os.MkdirAll(filepath.Dir(dir), 0o755)
		if err == nil {
			err = os.Mkdir(dir, 0o755)
		}
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("create run directory: %w", err)
		}
		dir = fmt.Sprintf("%s-%d", base, i)
	}
}

// LatestLink is the name of the store's link to its last checked run.
const LatestLink = "latest"

// LinkLatest points store/latest at dir, atomically: a new link is made under a temporary name and
// renamed over the old one, so latest always names a whole run. The harness calls it only once the
// run has a verdict, so latest never points at a run that crashed or is still going.
func LinkLatest(store, dir string) error {
	rel, err := filepath.Rel(store, dir)
	if err != nil {
		return fmt.Errorf("link latest: %w", err)
	}
	// A name of this process's own: two runs finishing at once must not remove each other's link.
	tmp := filepath.Join(store, fmt.Sprintf(".latest.tmp-%d", os.Getpid()))
	os.Remove(tmp)
	if err := os.Symlink(rel, tmp); err != nil {
		return fmt.Errorf("link latest: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(store, LatestLink)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("link latest: %w", err)
	}
	return syncDir(store)
}

// WriteJSON writes v as indented JSON to dir/name, atomically.
func WriteJSON(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	return WriteFileAtomic(filepath.Join(dir, name), append(b, '\n'))
}

// Document is results.json: the checker's result with the run it judged.
type Document struct {
	*checker.Result
	Run RunInfo `json:"run"`
}

// RunInfo says which run a result belongs to, and what the harness saw of the run beside the history.
type RunInfo struct {
	Dir         string `json:"dir"`
	Interrupted bool   `json:"interrupted,omitempty"`
	// Stopped says how much of its plan a run cut short had run, e.g. "interrupted at 12.3s of 35s".
	Stopped string `json:"stopped,omitempty"`
	// Errors are problems of the run itself (a nemesis operation that failed), beside the verdict.
	Errors []string `json:"errors,omitempty"`
	// Warnings are signs that the run measured the harness more than the lock: an overloaded machine
	// (many indeterminate outcomes) with the flag that fixes it.
	Warnings []string `json:"warnings,omitempty"`
	// Library is the library the run tested (config.json's library): what a client program's
	// init_ok said, an adapted Go library's module and version, or lockpick for a built-in lock.
	Library *history.Library `json:"library,omitempty"`
}

// Write stores a result: results.json, summary.txt, the visualization and the report (which reads
// the run's history again; CheckRun's Write does not).
func Write(dir string, res *checker.Result, info RunInfo) error {
	return writeResults(dir, res, info, func() error { return WriteReport(dir, res, info) })
}

// writeResults writes the record, then the files derived from it; it stops at the first failure.
func writeResults(dir string, res *checker.Result, info RunInfo, report func() error) error {
	if err := writeRecord(dir, res, info); err != nil {
		return err
	}
	return errors.Join(writeDerived(dir, res, info, report)...)
}

// writeRecord writes results.json, the record of the verdict that every other file is derived from.
func writeRecord(dir string, res *checker.Result, info RunInfo) error {
	return WriteJSON(dir, ResultsFile, Document{Result: res, Run: info})
}

// writeDerived writes summary.txt, the visualizations and the report. Each is tried even when one
// before it failed (a report too large for what is left on the disk says nothing of the summary),
// and every failure is returned.
func writeDerived(dir string, res *checker.Result, info RunInfo, report func() error) []error {
	var errs []error
	try := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	try(WriteFileAtomic(filepath.Join(dir, SummaryFile), []byte(Summary(res, info))))
	if err := writeAtomic(filepath.Join(dir, VisualizationFile), res.Visualize); err != nil {
		try(fmt.Errorf("write visualization: %w", err))
	}
	try(report())
	if res.Resource != nil {
		if err := writeAtomic(filepath.Join(dir, ResourceVisualizationFile), res.Resource.Visualize); err != nil {
			try(fmt.Errorf("write resource visualization: %w", err))
		}
	}
	return errs
}

// WriteFix names what to do about a file of the store that could not be written, for the warning
// that follows a verdict already said.
func WriteFix(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "free space under the store or choose another --store"
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return "make the store writable or choose another --store"
	}
	return "choose another --store"
}

// Summary is summary.txt: the checker's summary with what the harness saw of the run. Its first
// lines are the verdict and the first finding, as the terminal showed them.
func Summary(res *checker.Result, info RunInfo) string {
	verdict := res.VerdictLines()
	rest := strings.TrimPrefix(res.Summary(), verdict)
	var b strings.Builder
	b.WriteString(verdict)
	switch {
	case info.Stopped != "":
		b.WriteString("The run was cut short (" + info.Stopped + "); this verdict covers the history recorded until then.\n")
	case info.Interrupted:
		b.WriteString("The run was interrupted; this verdict covers the history recorded until then.\n")
	}
	if l := info.Library; l != nil {
		b.WriteString("library: " + l.String() + "\n")
		for _, n := range l.Notes {
			b.WriteString("library note: " + n + "\n")
		}
	}
	b.WriteString(rest)
	for _, e := range info.Errors {
		b.WriteString("run error: " + e + "\n")
	}
	for _, w := range info.Warnings {
		b.WriteString("warning: " + w + "\n")
	}
	return b.String()
}

// writeAtomic streams a report into path through an AtomicFile.
func writeAtomic(path string, write func(io.Writer) error) error {
	f, err := CreateAtomic(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := write(f); err != nil {
		return err
	}
	return f.Commit()
}

// ReadInfo reads the RunInfo stored in a run directory's results.json, if there is one.
func ReadInfo(dir string) (RunInfo, error) {
	var doc struct {
		Run RunInfo `json:"run"`
	}
	b, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	if err != nil {
		return RunInfo{Dir: dir}, err
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return RunInfo{Dir: dir}, fmt.Errorf("read %s: %w", ResultsFile, err)
	}
	return doc.Run, nil
}
