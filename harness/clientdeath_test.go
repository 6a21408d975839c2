package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/results"
)

// crashConfig runs locks/testdata/crashclient.py in mode with args.
func crashConfig(t *testing.T, args ...string) Config {
	cfg := baseConfig(t)
	cfg.Lock, cfg.TimeLimit, cfg.Recovery = "client", Duration(2*time.Second), Duration(2*time.Second)
	cfg.ClientCmd = append([]string{"/usr/bin/python3", "../locks/testdata/crashclient.py"}, args...)
	return cfg
}

// A client program that dies mid-run (a traceback, os._exit while it holds, a segfault) is a
// finding with the end of its stderr, not a broken run: the slot goes on as a new process, the
// dead process's holds end at its death, and the verdict stands.
func TestClientDeathsAreAFinding(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"crash-after", "3"}, "ZeroDivisionError"},
		{[]string{"exit-holding", "2"}, "exiting while holding"},
		{[]string{"segv-after", "2"}, "about to crash hard"},
	} {
		t.Run(c.args[0], func(t *testing.T) {
			t.Parallel()
			out, err := Run(context.Background(), crashConfig(t, c.args...), nil)
			if err != nil {
				t.Fatalf("run: %v; a client's death must not stop the run", err)
			}
			r := out.Result
			ce := r.ClientExits
			if ce == nil || ce.Count == 0 || !strings.Contains(ce.Deaths[0].Stderr, c.stderr) {
				t.Fatalf("client exits %+v: want deaths quoting %q\n%s", ce, c.stderr, r.Summary())
			}
			if r.Valid != checker.Valid {
				t.Fatalf("verdict %s (%s): a lock that only lost its client to crashes stays valid\n%s", r.Valid, r.UnknownReason, r.Summary())
			}
			summary, _ := os.ReadFile(filepath.Join(out.Dir, results.SummaryFile))
			report, _ := os.ReadFile(filepath.Join(out.Dir, results.ReportFile))
			if !strings.Contains(string(summary), "client crashes: the client program crashed") || !strings.Contains(string(report), "client crash: p") {
				t.Fatalf("summary.txt or report.html does not report the crashes:\n%s", summary)
			}
		})
	}
}

// A client that dies at every start stops the run with one line that says so and quotes it,
// rather than restarting for the whole run; one that never answers init stops it too.
func TestClientThatAlwaysDiesStopsTheRun(t *testing.T) {
	t.Parallel()
	for mode, want := range map[string]string{
		"crash-first": "more than half of them",
		"no-init-ok":  "cannot initialise",
	} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			cfg := crashConfig(t, mode)
			// A plan far longer than the bound below, so that a loaded machine's slow starts do not
			// pass for a run that went on.
			cfg.TimeLimit = Duration(2 * time.Minute)
			began := time.Now()
			_, err := Run(context.Background(), cfg, nil)
			if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), want) {
				t.Fatalf("run: %v; want one line containing %q", err, want)
			}
			if took := time.Since(began); took > time.Minute {
				t.Fatalf("the run took %v to stop", took)
			}
		})
	}
}

// The library a client program names in its init_ok is in config.json, results.json and the
// summary; processes that name another are a note, not hidden.
func TestClientLibraryIsRecorded(t *testing.T) {
	t.Parallel()
	cfg := crashConfig(t, "library", "mylib", "3.{p}")
	cfg.Clients = 2
	out, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Library *history.Library `json:"library"`
	}
	b, err := os.ReadFile(filepath.Join(out.Dir, results.ConfigFile))
	if err != nil || json.Unmarshal(b, &stored) != nil || stored.Library == nil {
		t.Fatalf("config.json has no library: %v\n%s", err, b)
	}
	lib := *stored.Library
	if lib.Name != "mylib" || lib.Version != "3.0" || lib.Kind != history.LibraryProgram || len(lib.Notes) != 1 || !strings.Contains(lib.Notes[0], "p1 reported mylib 3.1") {
		t.Fatalf("library %+v: want mylib 3.0 with a note about p1's 3.1", lib)
	}
	info, err := results.ReadInfo(out.Dir)
	if err != nil || info.Library == nil || info.Library.Name != "mylib" {
		t.Fatalf("results.json's run has library %+v (%v)", info.Library, err)
	}
	summary, _ := os.ReadFile(filepath.Join(out.Dir, results.SummaryFile))
	if !strings.Contains(string(summary), "library: mylib 3.0 (client program)") || !strings.Contains(string(summary), "library note: p1 reported") {
		t.Fatalf("summary.txt does not name the library:\n%s", summary)
	}
}
