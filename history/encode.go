package history

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// appendEvent appends e as one line of JSON, byte for byte what encoding/json's Encoder writes for
// it, about five times faster: the recorder writes every event of a run under its lock, so at the
// ceiling its encoding is part of every operation's cost. Events with a plan, roles or offsets (a
// handful per run) go through encoding/json.
//
// asWritten reports whether reading the line back gives e itself (nodes aside, see Tap.put): no
// plan, roles or offsets, and every string valid UTF-8 (encoding/json writes invalid bytes as
// U+FFFD). The encoder finds it on its way, as it already looks at every byte of every string.
func appendEvent(b []byte, e *Event) (line []byte, asWritten bool, err error) {
	if e.Plan != nil || e.Roles != nil || e.Offsets != nil {
		j, err := json.Marshal(e)
		if err != nil {
			return b, false, err
		}
		return append(append(b, j...), '\n'), false, nil
	}
	w := lineWriter{b: b}
	w.raw(`{"index":`)
	w.int(e.Index)
	w.raw(`,"time":`)
	w.int(e.Time)
	w.raw(`,"type":`)
	w.str(string(e.Type))
	w.raw(`,"process":`)
	w.int(int64(e.Process))
	w.raw(`,"f":`)
	w.str(e.F)
	w.optStr(`,"key":`, e.Key)
	w.optStr(`,"value":`, e.Value)
	w.optInt(`,"token":`, e.Token)
	w.optInt(`,"deadline":`, e.Deadline)
	w.optInt(`,"validity":`, e.Validity)
	w.optInt(`,"depth":`, int64(e.Depth))
	if len(e.Nodes) > 0 {
		w.raw(`,"nodes":[`)
		for i, n := range e.Nodes {
			if i > 0 {
				w.raw(",")
			}
			w.str(n)
		}
		w.raw("]")
	}
	w.optStr(`,"fault":`, e.Fault)
	w.optStr(`,"effect":`, e.Effect)
	w.optStr(`,"guard":`, e.Guard)
	w.optStr(`,"reason":`, e.Reason)
	w.optStr(`,"note":`, e.Note)
	w.optStr(`,"stderr":`, e.Stderr)
	w.optStr(`,"error":`, e.Error)
	w.raw("}\n")
	return w.b, !w.invalid, nil
}

// asIs are the bytes encoding/json writes in a string as they are: printable ASCII other than the
// quote, the backslash and the characters it escapes for HTML (<, >, &). A table, as the encoder
// looks at every byte of every string of every event.
var asIs = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// lineWriter appends the parts of one event's line, noting whether any string was not valid UTF-8.
type lineWriter struct {
	b       []byte
	invalid bool
}

func (w *lineWriter) raw(s string) { w.b = append(w.b, s...) }

func (w *lineWriter) int(v int64) { w.b = strconv.AppendInt(w.b, v, 10) }

func (w *lineWriter) optStr(name, s string) {
	if s != "" {
		w.raw(name)
		w.str(s)
	}
}

func (w *lineWriter) optInt(name string, v int64) {
	if v != 0 {
		w.raw(name)
		w.int(v)
	}
}

// str appends s quoted as encoding/json quotes it: printable ASCII other than the quote, the
// backslash and the characters it escapes for HTML (<, >, &) goes as it is; a string with any other
// byte is left to encoding/json.
func (w *lineWriter) str(s string) {
	for i := 0; i < len(s); i++ {
		if !asIs[s[i]] {
			j, _ := json.Marshal(s) // a string always encodes
			w.b = append(w.b, j...)
			w.invalid = w.invalid || !utf8.ValidString(s)
			return
		}
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, s...)
	w.b = append(w.b, '"')
}
