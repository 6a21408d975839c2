package history

import (
	"io"
	"slices"
	"sync"
)

// A Tap hands the events a Recorder writes to a reader in the same process (the check that runs
// while the run goes) as the reader would decode them from the file, without the decoding: at the
// ceiling decoding every event back was 8% of the harness's CPU, taken from the clients. An event
// goes over as it is only where reading its line gives back exactly that event: no plan, roles or
// offsets, and every string valid UTF-8 (encoding/json writes invalid bytes as U+FFFD). Any other
// event goes over as its line, which the reader decodes with the file's decoder. Strings are
// shared as the decoder shares them, so the reader keeps no more memory than reading the file.
//
// The queue is bounded: a reader that falls tapMax events behind (a starved machine) reads the
// rest of the history from the file instead, from the first event the tap did not take, and the
// run never waits for its check.
type Tap struct {
	mu       sync.Mutex
	queue    []tapped
	max      int
	n        int // events put: the next event's line is n+1
	nodes    []string
	over     bool  // the tap stopped taking events
	overAt   int64 // then: the file offset of the first event it did not take
	overLine int   // and that event's line
}

type tapped struct {
	ev   Event
	line []byte // the line to decode, when ev cannot go over as it is
}

// tapMax is how far behind a reader may fall before it reads the file: about a second of the
// ceiling's events, 20 MiB.
const tapMax = 1 << 16

// NewTap returns a tap for one Recorder (see Create) and one reader.
func NewTap() *Tap { return &Tap{max: tapMax} }

// put queues the event the recorder just wrote as line, which starts at offset at of the file;
// asWritten says reading line back gives e itself (appendEvent). The recorder's lock is held, so
// puts come in history order.
func (t *Tap) put(e *Event, asWritten bool, line []byte, at int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	if t.over {
		return
	}
	if len(t.queue) >= t.max {
		t.over, t.overAt, t.overLine = true, at, t.n
		return
	}
	t.queue = append(t.queue, tapped{})
	q := &t.queue[len(t.queue)-1]
	if !asWritten {
		q.line = slices.Clone(line)
		return
	}
	q.ev = *e
	if len(e.Nodes) == 0 {
		q.ev.Nodes = nil // written only when there are some: read back as none
	} else {
		// A copy, shared with the previous event's when the same (as the decoder shares them): the
		// lock that made the list may reuse it.
		if !equalStrings(e.Nodes, t.nodes) {
			t.nodes = slices.Clip(slices.Clone(e.Nodes))
		}
		q.ev.Nodes = t.nodes
	}
}

// take moves the queued events into into (emptied first) and returns them; over says the tap
// stopped taking events, and from which offset and line the file holds the rest.
func (t *Tap) take(into []tapped) (batch []tapped, over bool, overAt int64, overLine int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	batch, t.queue = t.queue, into[:0]
	return batch, t.over, t.overAt, t.overLine
}

// TapReader reads a tap's events one at a time, as a Scanner reads the file: the checker takes
// either.
type TapReader struct {
	tap *Tap
	// wait is called when the tap is empty: nil to look again, io.EOF when the history is whole
	// (the recorder closed it before the tap was last found empty), any other error to stop.
	wait func() error
	// rest opens the history file at offset at, for the events the tap did not take.
	rest func(at int64) (io.Reader, error)

	batch, spare []tapped
	pos          int
	line         int
	ev           Event
	dec          *decoder
	err          error
	done         bool
	whole        func() bool

	file *Scanner // reading the file, once the tap has stopped taking events
}

// NewTapReader reads tap. whole reports whether the recorder has closed the history; wait waits
// for more events (see TapReader.wait); rest opens the file at an offset.
func NewTapReader(tap *Tap, whole func() bool, wait func() error, rest func(at int64) (io.Reader, error)) *TapReader {
	return &TapReader{tap: tap, whole: whole, wait: wait, rest: rest, dec: newDecoder()}
}

// Scan advances to the next event; false at the end of the history or at an error (see Err).
func (r *TapReader) Scan() bool {
	if r.file != nil {
		return r.file.Scan()
	}
	for !r.done {
		if r.pos < len(r.batch) {
			q := &r.batch[r.pos]
			r.pos++
			r.line++
			if q.line != nil {
				if err := r.dec.decode(q.line, &r.ev); err != nil {
					r.err, r.done = err, true
					return false
				}
				return true
			}
			r.ev = q.ev
			r.intern()
			return true
		}
		// Whole before the take: what the take finds is all there is.
		whole := r.whole()
		r.spare, r.pos = r.batch, 0
		batch, over, at, overLine := r.tap.take(r.spare)
		if r.batch = batch; len(batch) > 0 {
			continue
		}
		if over {
			return r.openFile(at, overLine)
		}
		if whole {
			r.done = true
			return false
		}
		if err := r.wait(); err != nil {
			r.done = true
			if err != io.EOF {
				r.err = err
			}
			return false
		}
	}
	return false
}

// openFile goes on from the file, at the first event the tap did not take, which is on line.
func (r *TapReader) openFile(at int64, line int) bool {
	f, err := r.rest(at)
	if err != nil {
		r.err, r.done = err, true
		return false
	}
	r.file = NewScanner(f)
	r.file.line = line - 1 // its lines, and the lines its errors name, are the history's
	return r.file.Scan()
}

// intern shares the strings a run makes afresh for each event (a key, an error's text), as the
// decoder shares every repeated string of the file: a checker that keeps them keeps one copy.
// Types, operation names and reasons are the package's constants, shared already.
func (r *TapReader) intern() {
	e := &r.ev
	for _, s := range [...]*string{&e.Key, &e.Error, &e.Fault, &e.Effect, &e.Guard} {
		if *s != "" {
			r.dec.intern(s)
		}
	}
}

// Event is the event the last Scan read; the next Scan overwrites it.
func (r *TapReader) Event() *Event {
	if r.file != nil {
		return r.file.Event()
	}
	return &r.ev
}

// Line is the 1-based line of the event the last Scan read.
func (r *TapReader) Line() int {
	if r.file != nil {
		return r.file.Line()
	}
	return r.line
}

// Err is the error that ended the scan, or nil.
func (r *TapReader) Err() error {
	if r.file != nil {
		return r.file.Err()
	}
	return r.err
}

// Truncated is the line of a last line cut short, 0 if the history ended cleanly; see Log. A
// recorder writes whole lines, so only the file's part can end in one.
func (r *TapReader) Truncated() int {
	if r.file != nil {
		return r.file.Truncated()
	}
	return 0
}
