package history

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

// TestTapReadsWhatTheFileHolds records random events (escapes, invalid UTF-8, empty node lists,
// plans, roles, offsets) while a TapReader reads them, and holds every event and line it gives to
// what a Scanner reads from the file afterwards. With a queue of a few events the reader falls
// behind and goes on from the file mid-run, and must still give the same.
func TestTapReadsWhatTheFileHolds(t *testing.T) {
	for _, max := range []int{tapMax, 7} {
		path := filepath.Join(t.TempDir(), FileName)
		rec, err := Create(path, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		tap, err := rec.NewTap()
		if err != nil {
			t.Fatal(err)
		}
		tap.max = max
		var whole atomic.Bool
		var f *os.File
		r := NewTapReader(tap, whole.Load, func() error { time.Sleep(time.Millisecond); return nil }, func(at int64) (io.Reader, error) {
			var err error
			if f, err = os.Open(path); err != nil {
				return nil, err
			}
			_, err = f.Seek(at, io.SeekStart)
			return &tailReader{f: f, whole: whole.Load}, err
		})
		type read struct {
			ev   Event
			line int
		}
		got := make(chan []read)
		go func() {
			var rs []read
			for r.Scan() {
				rs = append(rs, read{*r.Event(), r.Line()})
			}
			if r.Err() != nil || r.Truncated() != 0 {
				t.Errorf("tap reader: err %v, truncated %d", r.Err(), r.Truncated())
			}
			got <- rs
		}()
		rng := rand.New(rand.NewPCG(3, 4))
		for i := range 5000 {
			e := randomEvent(rng)
			if i%10 == 0 {
				e.Stderr = "traceback \xfe"
			}
			rec.Record(e)
			if i%500 == 0 {
				time.Sleep(2 * time.Millisecond) // let the reader find the queue empty now and then
			}
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		whole.Store(true)
		rs := <-got
		if f != nil {
			f.Close()
		} else if max < tapMax {
			t.Errorf("queue of %d: the reader never went on from the file", max)
		}
		want, err := ReadLogFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != len(want.Events) {
			t.Fatalf("queue of %d: tap gave %d events, the file holds %d", max, len(rs), len(want.Events))
		}
		for i, x := range rs {
			if !reflect.DeepEqual(x.ev, want.Events[i]) || x.line != want.Line(i) {
				t.Fatalf("queue of %d, event %d:\n tap  %+v (line %d)\n file %+v (line %d)", max, i, x.ev, x.line, want.Events[i], want.Line(i))
			}
		}
	}
}

// TestTapAbandoned: a reader whose wait says stop ends with that error, not with a history.
func TestTapAbandoned(t *testing.T) {
	rec, err := Create(filepath.Join(t.TempDir(), FileName), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	tap, err := rec.NewTap()
	if err != nil {
		t.Fatal(err)
	}
	rec.Record(Event{Type: Invoke, Process: 0, F: FAcquire, Key: "k"})
	stop := errors.New("the run failed")
	r := NewTapReader(tap, func() bool { return false }, func() error { return stop }, nil)
	if !r.Scan() || r.Event().F != FAcquire {
		t.Fatalf("first event not read: %v", r.Err())
	}
	if r.Scan() || !errors.Is(r.Err(), stop) {
		t.Fatalf("Scan after a stop: err %v, want %v", r.Err(), stop)
	}
	if _, err := rec.NewTap(); err == nil {
		t.Error("a second tap, after events were recorded, was accepted")
	}
}

// tailReader reads a file being appended to until whole says it is complete.
type tailReader struct {
	f     *os.File
	whole func() bool
}

func (r *tailReader) Read(p []byte) (int, error) {
	for {
		done := r.whole()
		n, err := r.f.Read(p)
		if n > 0 || (err != nil && err != io.EOF) {
			return n, err
		}
		if done {
			return 0, io.EOF
		}
		time.Sleep(time.Millisecond)
	}
}
