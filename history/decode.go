package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// decoder parses history lines. Its fast path is a scanner made for the event schema as the
// Recorder writes it: an object of known fields with integers, plain ASCII strings and a list of
// nodes. Anything else (escapes, non-ASCII text, null, floats, a plan, offsets, a field it does not
// know, a malformed line) goes to encoding/json, which decides and words the error; so the fast path
// only ever accepts what encoding/json would accept, with the same event (FuzzDecode holds it to
// that).
type decoder struct {
	// Most strings of a history repeat (operation names, keys, error texts); sharing one copy of
	// each keeps a history of millions of events to a fraction of the memory and allocations.
	seen map[string]string
	// recent holds the strings seen lately, by a cheap hash of their bytes: a line's few strings
	// are nearly always among them, found with one comparison instead of a map's hash and probe.
	recent [64]string
	// nodes is the last list of nodes decoded: consecutive grants by the same nodes share it.
	nodes   []string
	scratch []string
}

func newDecoder() *decoder { return &decoder{seen: map[string]string{}} }

// decode parses one line into e (which it zeroes first).
func (d *decoder) decode(b []byte, e *Event) error {
	*e = Event{}
	if d.fast(b, e) {
		return nil
	}
	*e = Event{}
	if err := decodeEvent(b, e); err != nil {
		return err
	}
	t := string(e.Type)
	d.intern(&t)
	e.Type = Type(t)
	for _, s := range []*string{&e.F, &e.Key, &e.Fault, &e.Effect, &e.Error, &e.Reason, &e.Guard} {
		d.intern(s)
	}
	return nil
}

func (d *decoder) intern(s *string) {
	if v, ok := d.seen[*s]; ok {
		*s = v
	} else if len(d.seen) < 1<<16 {
		d.seen[*s] = *s
	}
}

// internBytes is intern for a string still in the line's bytes: a hit costs no allocation.
func (d *decoder) internBytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	slot := &d.recent[(uint(len(b))*7+uint(b[0])*31+uint(b[len(b)-1]))%uint(len(d.recent))]
	if *slot == string(b) {
		return *slot
	}
	if v, ok := d.seen[string(b)]; ok {
		*slot = v
		return v
	}
	s := string(b)
	if len(d.seen) < 1<<16 {
		d.seen[s] = s
	}
	*slot = s
	return s
}

// fast parses b if it is a plain event; false means "let encoding/json decide", never "invalid".
func (d *decoder) fast(b []byte, e *Event) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	var set uint32 // fields seen: a repeated one goes to encoding/json
	for {
		key, j, ok := fieldName(b, i)
		if !ok {
			return false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		var bit uint32
		var s []byte
		switch string(key) {
		case "index":
			bit = 1 << 0
			e.Index, i, ok = plainInt(b, i)
		case "time":
			bit = 1 << 1
			e.Time, i, ok = plainInt(b, i)
		case "process":
			bit = 1 << 2
			var p int64
			p, i, ok = plainInt(b, i)
			e.Process = int(p)
			ok = ok && int64(e.Process) == p
		case "token":
			bit = 1 << 3
			e.Token, i, ok = plainInt(b, i)
		case "deadline":
			bit = 1 << 4
			e.Deadline, i, ok = plainInt(b, i)
		case "validity":
			bit = 1 << 5
			e.Validity, i, ok = plainInt(b, i)
		case "type":
			bit = 1 << 6
			if s, i, ok = plainString(b, i); ok {
				e.Type = Type(d.internBytes(s))
			}
		case "f":
			bit = 1 << 7
			if s, i, ok = plainString(b, i); ok {
				e.F = d.internBytes(s)
			}
		case "key":
			bit = 1 << 8
			if s, i, ok = plainString(b, i); ok {
				e.Key = d.internBytes(s)
			}
		case "value":
			bit = 1 << 9
			if s, i, ok = plainString(b, i); ok {
				e.Value = string(s) // mostly unique: not worth a table entry
			}
		case "fault":
			bit = 1 << 10
			if s, i, ok = plainString(b, i); ok {
				e.Fault = d.internBytes(s)
			}
		case "effect":
			bit = 1 << 11
			if s, i, ok = plainString(b, i); ok {
				e.Effect = d.internBytes(s)
			}
		case "guard":
			bit = 1 << 12
			if s, i, ok = plainString(b, i); ok {
				e.Guard = d.internBytes(s)
			}
		case "reason":
			bit = 1 << 13
			if s, i, ok = plainString(b, i); ok {
				e.Reason = d.internBytes(s)
			}
		case "error":
			bit = 1 << 14
			if s, i, ok = plainString(b, i); ok {
				e.Error = d.internBytes(s)
			}
		case "nodes":
			bit = 1 << 15
			e.Nodes, i, ok = d.plainNodes(b, i)
		case "depth":
			bit = 1 << 16
			var n int64
			n, i, ok = plainInt(b, i)
			e.Depth = int(n)
			ok = ok && int64(e.Depth) == n
		default:
			return false // plan, offsets, a newer field, or an unknown one
		}
		if !ok || set&bit != 0 {
			return false
		}
		set |= bit
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// plainNodes parses a list of plain strings; the result is shared with the previous event's nodes
// when they are the same, and its capacity is its length so an append never writes into the share.
func (d *decoder) plainNodes(b []byte, i int) ([]string, int, bool) {
	if i >= len(b) || b[i] != '[' {
		return nil, i, false
	}
	i = skipSpace(b, i+1)
	list := d.scratch[:0]
	if i < len(b) && b[i] == ']' {
		return []string{}, i + 1, true
	}
	for {
		s, j, ok := plainString(b, i)
		if !ok {
			return nil, i, false
		}
		list = append(list, d.internBytes(s))
		i = skipSpace(b, j)
		if i >= len(b) {
			return nil, i, false
		}
		if b[i] == ']' {
			i++
			break
		}
		if b[i] != ',' {
			return nil, i, false
		}
		i = skipSpace(b, i+1)
	}
	d.scratch = list
	if !equalStrings(list, d.nodes) {
		d.nodes = append([]string(nil), list...)
	}
	return d.nodes, i, true
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) || b == nil {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// skipSpace skips JSON whitespace from i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a string at i with no escape, control character or non-ASCII byte, and returns
// its contents and the position after it.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		c := b[j]
		if c-0x20 < 0x60 && c != '"' && c != '\\' {
			continue // printable ASCII: the common case, one comparison
		}
		if c == '"' {
			return b[i+1 : j], j + 1, true
		}
		return nil, i, false
	}
	return nil, i, false
}

// fieldName reads a field name at i: the bytes up to the next quote, and the position after it.
// Unlike plainString it does not check them, because only a name equal to one of the event's
// (all plain ASCII) is taken; an escape, or anything else, is no such name and goes to
// encoding/json.
func fieldName(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		if b[j] == '"' {
			return b[i+1 : j], j + 1, true
		}
	}
	return nil, i, false
}

// plainInt reads an integer of at most 18 digits (no fraction, exponent or leading zero) at i.
func plainInt(b []byte, i int) (int64, int, bool) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var v int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' && i-start < 19 {
		v = v*10 + int64(b[i]-'0')
		i++
	}
	n := i - start
	if n == 0 || n > 18 || (b[start] == '0' && n > 1) {
		return 0, i, false
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E' || (b[i] >= '0' && b[i] <= '9')) {
		return 0, i, false
	}
	if neg {
		v = -v
	}
	return v, i, true
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
