package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRecorderRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	rec, err := Create(path, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec.Record(Event{Type: Invoke, Process: 0, F: FAcquire, Key: "k"})
	rec.Record(Event{Type: OK, Process: 0, F: FAcquire, Key: "k", Value: "v", Deadline: 42, Nodes: []string{"n1"}})
	rec.Record(Event{Type: Invoke, Process: NemesisProcess, F: "kill", Nodes: []string{"n1"}, Fault: "restart", Effect: EffectFault})
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	evs, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Fatalf("read %d events, want 3", len(evs))
	}
	for i, e := range evs {
		if e.Index != int64(i) {
			t.Errorf("event %d has index %d", i, e.Index)
		}
		if i > 0 && e.Time < evs[i-1].Time {
			t.Errorf("event %d is earlier than event %d", i, i-1)
		}
	}
	if evs[1].Value != "v" || evs[1].Deadline != 42 || evs[1].Nodes[0] != "n1" {
		t.Errorf("ok acquire did not round-trip: %+v", evs[1])
	}
	if !evs[2].IsNemesis() || evs[2].Effect != EffectFault {
		t.Errorf("nemesis event did not round-trip: %+v", evs[2])
	}
}

// A run killed mid-write leaves a partial last line; everything before it is still a history.
func TestReadToleratesTruncatedLastLine(t *testing.T) {
	in := `{"index":0,"time":1,"type":"invoke","process":0,"f":"acquire"}` + "\n" + `{"index":1,"time":2,"ty`
	evs, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Fatalf("got %d events, want 1", len(evs))
	}
}

func TestReadRejectsMalformedLine(t *testing.T) {
	in := "{\"index\":0}\nnot json\n{\"index\":2}\n"
	if _, err := Read(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("want an error naming line 2, got %v", err)
	}
}

// The history is on disk while the run goes on, not only at the end.
func TestRecorderStreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	rec, err := Create(path, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	rec.Record(Event{Type: Invoke, Process: 0, F: FAcquire})
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), `"acquire"`) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("event not on disk 2s after it was recorded")
}
