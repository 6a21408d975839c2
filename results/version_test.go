package results

import (
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testVersion = "v0.0.0-20261126183932-46dafc325a37+dirty"

// The version config.json records is the one the report's header and both cards name; records
// from before versions were stamped name their revision.
func TestVersionInReportAndCards(t *testing.T) {
	t.Parallel() // long and CPU-bound: runs beside the package's other long checks (issue 28)
	meta := config(3)
	meta["version"] = testVersion
	dir, _ := writeRun(t, &synth{clients: 3, duration: 3000 * ms}, meta)
	page, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.UnescapeString(string(page)), "<dt>lockpick</dt><dd>"+testVersion+"</dd>") {
		t.Errorf("report.html does not name lockpick %s", testVersion)
	}
	started := time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)
	var matrix, library strings.Builder
	if err := (&Card{Started: started, Version: testVersion}).Markdown(&matrix); err != nil {
		t.Fatal(err)
	}
	if err := (&LibraryCard{Lock: "single", Started: started, Version: testVersion}).Markdown(&library); err != nil {
		t.Fatal(err)
	}
	for name, md := range map[string]string{"matrix card": matrix.String(), "library card": library.String()} {
		if !strings.Contains(md, "lockpick "+testVersion) {
			t.Errorf("the %s does not name lockpick %s:\n%.400s", name, testVersion, md)
		}
	}
	if got := harnessVersion("", "0123456789abcdef0123456789abcdef01234567-dirty"); got != "revision 0123456789ab-dirty" {
		t.Errorf("an unversioned record reads %q, want its short revision", got)
	}
}
