package main

import (
	"bytes"
	"encoding/json"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// execute runs lockpick in-process with args and returns what it printed.
func execute(t *testing.T, args ...string) string {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		t.Fatalf("lockpick %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// Both forms print the version, the revision, and the Go version; a test binary has no VCS stamp
// and says so instead of printing "(devel)".
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out := execute(t, args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "lockpick ") || !strings.HasPrefix(lines[1], "revision ") {
			t.Fatalf("%v printed %q, want three lines: version, revision, Go", args, out)
		}
		if lines[0] == "lockpick (devel)" {
			t.Errorf("%v: %q names no version and does not say why", args, lines[0])
		}
		if !strings.HasPrefix(lines[2], runtime.Version()+" ") {
			t.Errorf("%v: Go line %q, want %s", args, lines[2], runtime.Version())
		}
	}
}

func TestVersionOfStamp(t *testing.T) {
	rev := "46dafc325a37c45f694e5a45788d31cae6d39d57"
	at := time.Date(2026, 11, 26, 18, 39, 32, 0, time.UTC)
	for _, c := range []struct {
		s    stamp
		want string
	}{
		{stamp{Module: "v1.2.0", Revision: rev, Time: at}, "v1.2.0"},
		{stamp{Module: "v0.0.0-20261126183932-46dafc325a37+dirty", Revision: rev, Time: at, Modified: true}, "v0.0.0-20261126183932-46dafc325a37+dirty"},
		{stamp{Module: "(devel)", Revision: rev, Time: at}, "v0.0.0-20261126183932-46dafc325a37"},
		{stamp{Module: "(devel)", Revision: rev, Time: at.In(time.FixedZone("CET", 3600)), Modified: true}, "v0.0.0-20261126183932-46dafc325a37+dirty"},
		{stamp{Tag: "v0.3.1", Revision: rev, Time: at, Modified: true}, "v0.3.1+dirty"},
		{stamp{Revision: rev, Modified: true}, "(devel, revision 46dafc325a37+dirty)"},
		{stamp{Module: "(devel)"}, "(devel, unstamped)"},
	} {
		if got := c.s.Version(); got != c.want {
			t.Errorf("%+v: version %q, want %q", c.s, got, c.want)
		}
	}
	if got := (stamp{Revision: rev, Modified: true}).FullRevision(); got != rev+"-dirty" {
		t.Errorf("full revision %q, want %s-dirty", got, rev)
	}
}

// make build stamps the version from git, in a worktree too (where go build alone does not): the
// binary prints the pseudo-version of HEAD, and the revision git names.
func TestVersionMakeBuildStamps(t *testing.T) {
	t.Parallel() // waits on the programs it runs: runs beside the others (issue 28)
	if testing.Short() {
		t.Skip("builds lockpick (-short)")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("not a git checkout: nothing to stamp")
	}
	rev := strings.TrimSpace(string(head))
	dir := t.TempDir()
	bin := filepath.Join(dir, "lockpick")
	mk := exec.Command("make", "-s", "-C", "../..", "build", "BIN="+bin, "SHIM="+filepath.Join(dir, "libclockshim.so"))
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("lockpick version: %v", err)
	}
	version := `v0\.0\.0-\d{14}-` + rev[:12]
	if tag, err := exec.Command("git", "describe", "--tags", "--exact-match", "HEAD").Output(); err == nil {
		version = regexp.QuoteMeta(strings.TrimSpace(string(tag)))
	}
	want := regexp.MustCompile(`^lockpick ` + version + `(\+dirty)?\nrevision ` + rev + `(-dirty)? \(`)
	if !want.Match(out) {
		t.Errorf("make build's lockpick version printed\n%s\nwant the pseudo-version of %s", out, rev)
	}
	t.Logf("%s", out)
	runRecordsVersion(t, bin, strings.TrimPrefix(strings.SplitN(string(out), "\n", 2)[0], "lockpick "))
}

// runRecordsVersion makes a short run with bin: its config.json and its report name version.
func runRecordsVersion(t *testing.T, bin, version string) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server: the run that records the version cannot start")
	}
	store := t.TempDir()
	run := exec.Command(bin, "run", "--lock", "single", "--ttl", "500ms", "--time-limit", "1s", "--recovery", "500ms", "--seed", "1", "--store", store)
	if out, err := run.CombinedOutput(); exitCode(err) < 0 || exitCode(err) > 2 {
		t.Fatalf("run: %v\n%s", err, out)
	}
	var cfg struct{ Version string }
	b, err := os.ReadFile(filepath.Join(store, "latest", "config.json"))
	if err != nil || json.Unmarshal(b, &cfg) != nil || cfg.Version != version {
		t.Errorf("config.json records version %q (%v), want %q", cfg.Version, err, version)
	}
	page, err := os.ReadFile(filepath.Join(store, "latest", "report.html"))
	if err != nil || !strings.Contains(html.UnescapeString(string(page)), "<dt>lockpick</dt><dd>"+version+"</dd>") {
		t.Errorf("the report's header does not name lockpick %s (%v)", version, err)
	}
}
