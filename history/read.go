package history

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// Log is a history as read from its file: the events, the line each came from, and what the reader
// noticed about the file itself. The checker names lines, not positions, in what it reports, so a
// user can open the file at the line that is wrong.
type Log struct {
	Events []Event
	// Lines[i] is the 1-based line of Events[i] in the file (blank lines are skipped, so positions
	// and lines can differ). Nil means event i is on line i+1, as in every history the Recorder
	// writes.
	Lines []int32
	// Truncated is the line number of a last line cut short (no newline at its end, and a prefix of
	// an event rather than an event): a run killed mid-write leaves one. It is not an event; 0 when
	// the file ended cleanly.
	Truncated int
}

// Line is the 1-based line of event i.
func (l *Log) Line(i int) int {
	if l.Lines == nil {
		return i + 1
	}
	return int(l.Lines[i])
}

// Scanner reads a history one event at a time, so a reader that keeps only what it needs (the
// checker) uses memory that does not grow with the history's length. It is as strict as ReadLog:
// Err names the line of a malformed event, an unknown field or text after an event; a last line cut
// short by a crash ends the scan cleanly and is reported by Truncated.
type Scanner struct {
	br        *bufio.Reader
	dec       *decoder
	line      int
	ev        Event
	err       error
	truncated int
	done      bool
}

// NewScanner returns a Scanner reading r.
func NewScanner(r io.Reader) *Scanner {
	return &Scanner{br: bufio.NewReaderSize(r, 1<<20), dec: newDecoder()}
}

// Scan advances to the next event; false at the end of the history or at an error (see Err).
func (s *Scanner) Scan() bool {
	for !s.done {
		s.line++
		b, err := s.br.ReadSlice('\n')
		if err != nil && errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: read the rest of it.
			long := append([]byte(nil), b...)
			for errors.Is(err, bufio.ErrBufferFull) {
				b, err = s.br.ReadSlice('\n')
				long = append(long, b...)
			}
			b = long
		}
		last := err != nil && errors.Is(err, io.EOF)
		if err != nil && !last {
			s.err, s.done = fmt.Errorf("line %d: %w", s.line, err), true
			return false
		}
		s.done = last
		if blank(b) {
			continue
		}
		if derr := s.dec.decode(b, &s.ev); derr != nil {
			s.done = true
			if last && errors.Is(derr, io.ErrUnexpectedEOF) {
				s.truncated = s.line // the half-written last line of a killed run
				return false
			}
			s.err = fmt.Errorf("line %d: %w", s.line, derr)
			return false
		}
		return true
	}
	return false
}

// blank reports whether a line holds only whitespace; an event's line starts with its brace.
func blank(b []byte) bool {
	return (len(b) == 0 || b[0] != '{') && len(bytes.TrimSpace(b)) == 0
}

// Event is the event the last Scan read; the next Scan overwrites it.
func (s *Scanner) Event() *Event { return &s.ev }

// Line is the 1-based line of the event the last Scan read.
func (s *Scanner) Line() int { return s.line }

// Err is the error that ended the scan, or nil.
func (s *Scanner) Err() error { return s.err }

// Truncated is the line of a last line cut short, 0 if the history ended cleanly; see Log.
func (s *Scanner) Truncated() int { return s.truncated }

// ReadLogFile reads a history file, keeping the line of each event.
func ReadLogFile(path string) (*Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	// Size the slices from the line count first: growing them by doubling would briefly need twice
	// the memory of a history of millions of events.
	lines, err := countLines(f)
	if err != nil {
		return nil, fmt.Errorf("read history %s: %w", path, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("read history %s: %w", path, err)
	}
	l, err := read(f, lines)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// ReadLog parses a JSON-lines history, keeping the line of each event. A last line cut short by a
// crash is left out and reported in Truncated; a malformed line anywhere else, an unknown field or
// text after an event is an error naming the line.
func ReadLog(r io.Reader) (*Log, error) { return read(r, 0) }

// ReadFile reads a history file. It is ReadLogFile without the lines.
func ReadFile(path string) ([]Event, error) {
	l, err := ReadLogFile(path)
	if err != nil {
		return nil, err
	}
	return l.Events, nil
}

// Read parses a JSON-lines history. It is ReadLog without the lines.
func Read(r io.Reader) ([]Event, error) {
	l, err := ReadLog(r)
	if err != nil {
		return nil, err
	}
	return l.Events, nil
}

func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 1<<20)
	n := 0
	for {
		k, err := r.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if errors.Is(err, io.EOF) {
			return n + 1, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

func read(r io.Reader, capacity int) (*Log, error) {
	s := NewScanner(r)
	l := &Log{Events: make([]Event, 0, capacity), Lines: make([]int32, 0, capacity)}
	oneToOne := true
	for s.Scan() {
		oneToOne = oneToOne && s.Line() == len(l.Events)+1
		l.Events = append(l.Events, *s.Event())
		l.Lines = append(l.Lines, int32(s.Line()))
	}
	if s.Err() != nil {
		return nil, s.Err()
	}
	l.Truncated = s.Truncated()
	if oneToOne {
		l.Lines = nil
	}
	return l, nil
}
