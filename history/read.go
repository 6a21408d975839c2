package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
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
	br := bufio.NewReaderSize(r, 1<<20)
	l := &Log{Events: make([]Event, 0, capacity), Lines: make([]int32, 0, capacity)}
	oneToOne := true
	// Most strings of a history repeat (operation names, keys, error texts); sharing one copy of each
	// keeps a history of millions of events to a fraction of the memory.
	seen := map[string]string{}
	intern := func(s *string) {
		if v, ok := seen[*s]; ok {
			*s = v
		} else if len(seen) < 1<<16 {
			seen[*s] = *s
		}
	}
	for line := 1; ; line++ {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: read the rest of it.
			long := append([]byte(nil), b...)
			for errors.Is(err, bufio.ErrBufferFull) {
				b, err = br.ReadSlice('\n')
				long = append(long, b...)
			}
			b = long
		}
		last := errors.Is(err, io.EOF)
		if err != nil && !last {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if len(bytes.TrimSpace(b)) > 0 {
			var e Event
			if derr := decodeEvent(b, &e); derr != nil {
				if last && errors.Is(derr, io.ErrUnexpectedEOF) {
					l.Truncated = line // the half-written last line of a killed run
					break
				}
				return nil, fmt.Errorf("line %d: %w", line, derr)
			}
			t := string(e.Type)
			intern(&t)
			e.Type = Type(t)
			intern(&e.F)
			intern(&e.Key)
			intern(&e.Fault)
			intern(&e.Effect)
			intern(&e.Error)
			intern(&e.Reason)
			oneToOne = oneToOne && line == len(l.Events)+1
			l.Events = append(l.Events, e)
			l.Lines = append(l.Lines, int32(line))
		}
		if last {
			break
		}
	}
	if oneToOne {
		l.Lines = nil
	}
	return l, nil
}

// decodeEvent parses one line strictly: a field the Event does not have is an error rather than
// silently dropped (a misspelt "dedline" would otherwise turn a lease into one that never ends), and
// so is anything after the event on the same line. An incomplete event is io.ErrUnexpectedEOF.
func decodeEvent(b []byte, e *Event) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(e); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return err
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if strings.HasPrefix(msg, "unknown field") {
			return fmt.Errorf("%s: an event's fields are %s", msg, strings.Join(eventFields(), ", "))
		}
		return fmt.Errorf("not a JSON event: %s", msg)
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return fmt.Errorf("text after the event: %.40q: one event per line", rest)
	}
	return nil
}

// eventFields are the JSON names of Event's fields, for the error that names an unknown one.
func eventFields() []string {
	t := reflect.TypeFor[Event]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}
