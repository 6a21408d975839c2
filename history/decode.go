package history

import (
	"bytes"
	"encoding/binary"
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
	// next[f] is the field that followed field f on the last line that had f (next[noField]: the
	// first field); quoted[f] is f's name in quotes, to be compared whole; byLetter the fields by
	// the first letter of their names.
	next     [noField + 1]int
	quoted   [noField]quotedName
	byLetter ['z' - 'a' + 1][]int
	// plain[c] is true for the bytes a plain string holds as they are: printable ASCII but the
	// quote and the backslash.
	plain [256]bool
}

// quotedName is a field's name in quotes, and the same as the little-endian words of its first 16
// bytes with masks of the bytes it fills.
type quotedName struct {
	text                   string
	lo, hi, loMask, hiMask uint64
}

// fieldNames are the fast path's field names, in field order: each starts with a lower-case letter
// and has at most 14 (quotedAt compares 16 bytes with the quotes; TestFieldNamesAgree holds both).
func fieldNames() [noField]string {
	return [noField]string{"index", "time", "process", "token", "deadline", "validity", "type", "f", "key",
		"value", "fault", "effect", "guard", "reason", "error", "nodes", "depth"}
}

func newDecoder() *decoder {
	d := &decoder{seen: map[string]string{}}
	for f, name := range fieldNames() {
		var word [16]byte
		k := &d.quoted[f]
		k.text = `"` + name + `"`
		copy(word[:], k.text)
		k.lo, k.hi = binary.LittleEndian.Uint64(word[:8]), binary.LittleEndian.Uint64(word[8:])
		k.loMask, k.hiMask = mask(len(k.text)), mask(len(k.text)-8)
		d.byLetter[name[0]-'a'] = append(d.byLetter[name[0]-'a'], f)
	}
	for f := range d.next {
		d.next[f] = noField
	}
	for c := 0x20; c < 0x7f; c++ {
		d.plain[c] = c != '"' && c != '\\'
	}
	return d
}

// mask has the low n bytes (at most 8) set.
func mask(n int) uint64 {
	switch {
	case n <= 0:
		return 0
	case n >= 8:
		return ^uint64(0)
	}
	return 1<<(8*n) - 1
}

// fieldAt reads a field name at i and returns which of the fast path's it is, and the position
// after its closing quote; noField for any other name (a plan, offsets, a newer field, an escape, a
// name in another case), which goes to encoding/json. Its first letter picks the candidates.
func (d *decoder) fieldAt(b []byte, i int) (int, int) {
	if i+1 >= len(b) || b[i] != '"' || b[i+1] < 'a' || b[i+1] > 'z' {
		return noField, i
	}
	for _, f := range d.byLetter[b[i+1]-'a'] {
		if j, ok := d.quotedAt(b, i, f); ok {
			return f, j
		}
	}
	return noField, i
}

// quotedAt reports whether b holds field f's quoted name at i, and the position after it: two words
// compared under masks where 16 bytes are left (nearly always: a line ends with its newline),
// the bytes otherwise.
func (d *decoder) quotedAt(b []byte, i, f int) (int, bool) {
	k := &d.quoted[f]
	if len(b)-i >= 16 {
		ok := binary.LittleEndian.Uint64(b[i:])&k.loMask == k.lo && binary.LittleEndian.Uint64(b[i+8:])&k.hiMask == k.hi
		return i + len(k.text), ok
	}
	return i + len(k.text), len(b)-i >= len(k.text) && string(b[i:i+len(k.text)]) == k.text
}

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

// known is internBytes for the types and the client operations, which nearly every line has: one
// of the package's constants is matched without hashing.
func (d *decoder) known(b []byte) string {
	switch string(b) {
	case string(Invoke):
		return string(Invoke)
	case string(OK):
		return string(OK)
	case string(Fail):
		return string(Fail)
	case FAcquire:
		return FAcquire
	case FRelease:
		return FRelease
	}
	return d.internBytes(b)
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
	prev := noField
	for {
		// Lines of one kind list their fields in one order: most names are the one that followed
		// the previous field last time.
		field, j, ok := d.next[prev], i, false
		if field != noField {
			j, ok = d.quotedAt(b, i, field)
		}
		if !ok {
			if field, j = d.fieldAt(b, i); field == noField {
				return false
			}
			d.next[prev] = field
		}
		prev = field
		// The recorder writes no whitespace: the colon, then the value, found without a call.
		if i = j + 1; j >= len(b) || b[j] != ':' {
			if i = punct(b, j, ':'); i < 0 {
				return false
			}
		} else if i < len(b) && b[i] <= ' ' {
			i = skipSpace(b, i)
		}
		bit := uint32(1) << field
		var s []byte
		switch field {
		case fieldIndex:
			e.Index, i, ok = plainInt(b, i)
		case fieldTime:
			e.Time, i, ok = plainInt(b, i)
		case fieldProcess:
			var p int64
			p, i, ok = plainInt(b, i)
			e.Process = int(p)
			ok = ok && int64(e.Process) == p
		case fieldToken:
			e.Token, i, ok = plainInt(b, i)
		case fieldDeadline:
			e.Deadline, i, ok = plainInt(b, i)
		case fieldValidity:
			e.Validity, i, ok = plainInt(b, i)
		case fieldType:
			if s, i, ok = d.plainString(b, i); ok {
				e.Type = Type(d.known(s))
			}
		case fieldF:
			if s, i, ok = d.plainString(b, i); ok {
				e.F = d.known(s)
			}
		case fieldKey:
			if s, i, ok = d.plainString(b, i); ok {
				e.Key = d.internBytes(s)
			}
		case fieldValue:
			if s, i, ok = d.plainString(b, i); ok {
				e.Value = string(s) // mostly unique: not worth a table entry
			}
		case fieldFault:
			if s, i, ok = d.plainString(b, i); ok {
				e.Fault = d.internBytes(s)
			}
		case fieldEffect:
			if s, i, ok = d.plainString(b, i); ok {
				e.Effect = d.internBytes(s)
			}
		case fieldGuard:
			if s, i, ok = d.plainString(b, i); ok {
				e.Guard = d.internBytes(s)
			}
		case fieldReason:
			if s, i, ok = d.plainString(b, i); ok {
				e.Reason = d.internBytes(s)
			}
		case fieldError:
			if s, i, ok = d.plainString(b, i); ok {
				e.Error = d.internBytes(s)
			}
		case fieldNodes:
			e.Nodes, i, ok = d.plainNodes(b, i)
		case fieldDepth:
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
		if i+1 < len(b) && b[i] == ',' && b[i+1] == '"' {
			i++
			continue // the next field, as the recorder writes it
		}
		if j := punct(b, i, ','); j >= 0 {
			i = j
			continue
		}
		if i = punct(b, i, '}'); i < 0 {
			return false
		}
		return skipSpace(b, i) == len(b)
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
		s, j, ok := d.plainString(b, i)
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

// The fields the fast path reads, numbered for the bit set of fields seen.
const (
	fieldIndex = iota
	fieldTime
	fieldProcess
	fieldToken
	fieldDeadline
	fieldValidity
	fieldType
	fieldF
	fieldKey
	fieldValue
	fieldFault
	fieldEffect
	fieldGuard
	fieldReason
	fieldError
	fieldNodes
	fieldDepth
	noField
)

// punct expects the byte c at i, after any whitespace, and returns the position of what follows it
// after any whitespace; -1 if c is not there.
func punct(b []byte, i int, c byte) int {
	if i >= len(b) || b[i] != c {
		if i = skipSpace(b, i); i >= len(b) || b[i] != c {
			return -1
		}
	}
	i++
	if i < len(b) && b[i] > ' ' {
		return i
	}
	return skipSpace(b, i)
}

// skipSpace skips JSON whitespace from i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a string at i with no escape, control character or non-ASCII byte, and returns
// its contents and the position after it.
func (d *decoder) plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	r := b[i+1:]
	for j, c := range r {
		if d.plain[c] {
			continue
		}
		if c == '"' {
			return r[:j], i + j + 2, true
		}
		return nil, i, false
	}
	return nil, i, false
}

// plainInt reads an integer of at most 18 digits (no fraction, exponent or leading zero) at i.
func plainInt(b []byte, i int) (int64, int, bool) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	// At most 19 digits are looked at: a 19th makes the number too long for the fast path.
	digits := b[i:min(len(b), i+19)]
	var v int64
	n := 0
	for n < len(digits) {
		c := digits[n] - '0'
		if c > 9 {
			break
		}
		v = v*10 + int64(c)
		n++
	}
	if n == 0 || n > 18 || (digits[0] == '0' && n > 1) {
		return 0, i + n, false
	}
	i += n
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
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
