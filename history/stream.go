package history

import (
	"bufio"
	"fmt"
	"os"
	"sync"
	"time"
)

// FileName is the name of the history inside a run directory.
const FileName = "history.jsonl"

// flushEvery bounds how much history a crash can lose.
const flushEvery = 50 * time.Millisecond

// Recorder stamps events with the run clock and streams them to disk as they happen, so that a
// crashed or interrupted run can still be checked.
type Recorder struct {
	start time.Time

	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	line []byte // the event being encoded, reused
	// enc is the copy of the event the encoder reads: encoding e itself would move every event
	// recorded to the heap (an allocation per event, at the ceiling 100,000 a second).
	enc      Event
	next     int64
	err      error
	closed   bool
	observer func(*Event)
	tap      *Tap
	written  int64 // bytes given to w: the file offset of the next line
	// failed is closed at the first write that fails (a full disk): a run whose history has a hole
	// cannot be checked, so the harness stops it at once.
	failed chan struct{}

	stopFlush chan struct{}
	flushDone chan struct{}
}

// Create opens path for writing and starts the run clock at start. observer, if not nil, sees every
// event after it is stamped, in history order; it must be fast, and must not keep the pointer (the
// recorder reuses the event it points to: a copy per observer of every event was a cost of each
// operation at the ceiling).
func Create(path string, start time.Time, observer func(*Event)) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create history: %w", err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	r := &Recorder{
		start: start, f: f, w: w, observer: observer,
		stopFlush: make(chan struct{}), flushDone: make(chan struct{}), failed: make(chan struct{}),
	}
	go r.flushLoop()
	return r, nil
}

// Restart moves the run clock's origin to start. Only a recorder that has recorded nothing may be
// restarted: every event of a history counts from one origin.
func (r *Recorder) Restart(start time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next != 0 {
		return fmt.Errorf("restart the run clock: %d events were already recorded", r.next)
	}
	r.start = start
	return nil
}

// NewTap hands every event recorded from now on to a reader in this process as well (see Tap).
// Only a recorder that has recorded nothing may be tapped: the reader reads the whole history.
func (r *Recorder) NewTap() (*Tap, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next != 0 || r.tap != nil {
		return nil, fmt.Errorf("tap the history: %d events were already recorded", r.next)
	}
	r.tap = NewTap()
	return r.tap, nil
}

// Now is the run clock: nanoseconds since the run started.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// At converts an instant to the run clock.
func (r *Recorder) At(t time.Time) int64 { return int64(t.Sub(r.start)) }

// Start is the instant the run clock counts from.
func (r *Recorder) Start() time.Time { return r.start }

// Record stamps e with the next index and the current time and appends it. Stamping under the lock
// keeps the file in time order.
func (r *Recorder) Record(e Event) Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Index = r.next
	r.next++
	e.Time = r.Now()
	if r.closed {
		return e
	}
	var err error
	var plain bool
	r.enc = e
	if r.line, plain, err = appendEvent(r.line[:0], &r.enc); err == nil {
		_, err = r.w.Write(r.line)
	}
	if err != nil {
		r.fail(fmt.Errorf("write history: %w", err))
	} else if r.tap != nil {
		r.tap.put(&r.enc, plain, r.line, r.written)
	}
	r.written += int64(len(r.line))
	if r.observer != nil {
		r.observer(&r.enc) // e's copy, which the lock keeps ours until Record returns
	}
	return e
}

func (r *Recorder) flushLoop() {
	defer close(r.flushDone)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stopFlush:
			return
		case <-t.C:
			r.mu.Lock()
			if err := r.w.Flush(); err != nil {
				r.fail(fmt.Errorf("write history: %w", err))
			}
			r.mu.Unlock()
		}
	}
}

// fail records the first write error and signals Failed; r.mu is held.
func (r *Recorder) fail(err error) {
	if r.err != nil {
		return
	}
	r.err = err
	close(r.failed)
}

// Failed is closed as soon as a write of the history fails; Err then says why.
func (r *Recorder) Failed() <-chan struct{} { return r.failed }

// Err is the first write error, or nil.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close flushes and closes the file. Events recorded after Close are dropped.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return r.err
	}
	r.closed = true
	r.mu.Unlock()
	close(r.stopFlush)
	<-r.flushDone
	r.mu.Lock()
	defer r.mu.Unlock()
	if ferr := r.w.Flush(); ferr != nil {
		r.fail(fmt.Errorf("write history: %w", ferr))
	}
	// Synced before the check reads it: a history that a power loss could cut short is not the
	// record a verdict may rest on.
	if st, err := r.f.Stat(); err == nil && st.Mode().IsRegular() {
		if serr := r.f.Sync(); serr != nil {
			r.fail(fmt.Errorf("sync history: %w", serr))
		}
	}
	if cerr := r.f.Close(); cerr != nil {
		r.fail(fmt.Errorf("close history: %w", cerr))
	}
	return r.err
}
