package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The reader keeps each event's line, past blank lines, so errors can name the line to open.
func TestHistoryReadLogKeepsLines(t *testing.T) {
	in := `{"index":0,"time":1,"type":"invoke","process":0,"f":"acquire"}` + "\n\n  \n" +
		`{"index":1,"time":2,"type":"ok","process":0,"f":"acquire"}` + "\n"
	l, err := ReadLog(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Events) != 2 || l.Line(0) != 1 || l.Line(1) != 4 || l.Truncated != 0 {
		t.Fatalf("events %d, lines %v, truncated %d; want lines 1 and 4", len(l.Events), l.Lines, l.Truncated)
	}
	// Without blank lines, events map to lines one to one and no line table is kept.
	l, err = ReadLog(strings.NewReader(`{"index":0}` + "\n" + `{"index":1}`))
	if err != nil || l.Lines != nil || l.Line(1) != 2 {
		t.Fatalf("one-to-one history: lines %v, err %v", l.Lines, err)
	}
}

// A half-written last line is reported as truncated, with its line number, not dropped silently.
func TestHistoryReadLogReportsTruncatedLastLine(t *testing.T) {
	in := `{"index":0,"time":1,"type":"invoke","process":0,"f":"acquire"}` + "\n" + `{"index":1,"time":2,"ty`
	l, err := ReadLog(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Events) != 1 || l.Truncated != 2 {
		t.Fatalf("events %d, truncated %d; want 1 event and line 2 truncated", len(l.Events), l.Truncated)
	}
	// A complete last line without its newline is an event, not a truncation.
	l, err = ReadLog(strings.NewReader(`{"index":0,"type":"invoke"}`))
	if err != nil || len(l.Events) != 1 || l.Truncated != 0 {
		t.Fatalf("last line without newline: %d events, truncated %d, err %v", len(l.Events), l.Truncated, err)
	}
	// Garbage on the last line is no truncation: a prefix of an event cannot look like that.
	if _, err := ReadLog(strings.NewReader("{\"index\":0}\n}garbage")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("garbage last line: want an error naming line 2, got %v", err)
	}
}

// Nothing is dropped silently: an unknown field, or a second event on one line, is an error.
func TestHistoryReadLogIsStrict(t *testing.T) {
	cases := map[string]string{
		"unknown field \"dedline\"": `{"index":0,"type":"ok","dedline":5}`,
		"text after the event":      `{"index":0,"type":"ok"} {"index":1}`,
		"not a JSON event":          `[1,2]`,
	}
	for want, line := range cases {
		in := `{"index":0}` + "\n" + line + "\n" + `{"index":2}` + "\n"
		_, err := ReadLog(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want an error naming line 2 and %q, got %v", line, want, err)
		}
	}
}

func TestHistoryReadLogFileNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	os.WriteFile(path, []byte("{\"index\":0}\n{\"index\":1,\n{\"index\":2}\n"), 0o644)
	_, err := ReadLogFile(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("want an error naming %s line 2, got %v", path, err)
	}
}
