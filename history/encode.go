package history

import (
	"encoding/json"
	"strconv"
)

// appendEvent appends e as one line of JSON, byte for byte what encoding/json's Encoder writes for
// it, about five times faster: the recorder writes every event of a run under its lock, so at the
// ceiling its encoding is part of every operation's cost. Events with a plan, roles or offsets (a
// handful per run) go through encoding/json.
func appendEvent(b []byte, e *Event) ([]byte, error) {
	if e.Plan != nil || e.Roles != nil || e.Offsets != nil {
		j, err := json.Marshal(e)
		if err != nil {
			return b, err
		}
		return append(append(b, j...), '\n'), nil
	}
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, e.Index, 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, e.Time, 10)
	b = append(b, `,"type":`...)
	b = appendString(b, string(e.Type))
	b = append(b, `,"process":`...)
	b = strconv.AppendInt(b, int64(e.Process), 10)
	b = append(b, `,"f":`...)
	b = appendString(b, e.F)
	b = appendOptString(b, `,"key":`, e.Key)
	b = appendOptString(b, `,"value":`, e.Value)
	b = appendOptInt(b, `,"token":`, e.Token)
	b = appendOptInt(b, `,"deadline":`, e.Deadline)
	b = appendOptInt(b, `,"validity":`, e.Validity)
	b = appendOptInt(b, `,"depth":`, int64(e.Depth))
	if len(e.Nodes) > 0 {
		b = append(b, `,"nodes":[`...)
		for i, n := range e.Nodes {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, n)
		}
		b = append(b, ']')
	}
	b = appendOptString(b, `,"fault":`, e.Fault)
	b = appendOptString(b, `,"effect":`, e.Effect)
	b = appendOptString(b, `,"guard":`, e.Guard)
	b = appendOptString(b, `,"reason":`, e.Reason)
	b = appendOptString(b, `,"note":`, e.Note)
	b = appendOptString(b, `,"stderr":`, e.Stderr)
	b = appendOptString(b, `,"error":`, e.Error)
	return append(b, '}', '\n'), nil
}

func appendOptString(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, name...), s)
}

func appendOptInt(b []byte, name string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, name...), v, 10)
}

// appendString appends s quoted as encoding/json quotes it: printable ASCII other than the quote,
// the backslash and the characters it escapes for HTML (<, >, &) goes as it is; a string with any
// other byte is left to encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s) // a string always encodes
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
