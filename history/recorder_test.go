package history

import (
	"os"
	"strings"
	"testing"
	"time"
)

// A history that cannot be written (a full disk) is signalled at once, not found at the end.
func TestRecorderSignalsAFailedWrite(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full to fill")
	}
	rec, err := Create("/dev/full", time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-rec.Failed():
		t.Fatal("Failed before anything was written")
	default:
	}
	rec.Record(Event{Type: Invoke, Process: 0, F: FAcquire, Key: "k"})
	select {
	case <-rec.Failed():
	case <-time.After(30 * time.Second):
		t.Fatal("a history on a full disk was not signalled as failed")
	}
	if err := rec.Err(); err == nil || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("Err = %v, want the disk-full error", err)
	}
	if err := rec.Close(); err == nil {
		t.Fatal("Close of a failed history returned no error")
	}
}
