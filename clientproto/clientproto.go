// Package clientproto is the client protocol: the JSON lines a lock client program reads on its
// stdin and writes on its stdout (docs/protocol.md). It encodes the harness's requests and decodes
// the client's replies strictly: a line that is not exactly one known message is an error, never a
// guess, because the history is built from what the client says.
package clientproto

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// Message types.
const (
	TypeInit      = "init"
	TypeInitOK    = "init_ok"
	TypeAcquire   = "acquire"
	TypeAcquireOK = "acquire_ok"
	TypeRelease   = "release"
	TypeReleaseOK = "release_ok"
	TypeExtend    = "extend"
	TypeExtendOK  = "extend_ok"
	TypeError     = "error"
	TypeRenewed   = "renewed"
	TypeLost      = "lost"
)

const (
	maxValidityMS  = float64(24 * 3600 * 1000) // a day: more is a broken client, not a lock
	maxValueLength = 4096
)

// MaxLine is the longest line a client may write; a longer one is a protocol error.
const MaxLine = 64 << 10

// Node is one endpoint of the client's group: a node of the system reached through its link.
type Node struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	Role string `json:"role"`
}

// Capabilities are what a library says it offers in init_ok.
type Capabilities struct {
	// Validity: every acquire_ok and extend_ok carries validity_ms.
	Validity bool `json:"validity"`
	// Token: acquire_ok carries a fencing token.
	Token bool `json:"token"`
	// Extend: the client answers extend requests.
	Extend bool `json:"extend"`
	// Watchdog: the library renews held leases by itself; without validity a lease then lasts
	// until its release (or a lost event).
	Watchdog bool `json:"watchdog"`
	// Reentrant: the owner may acquire a key it holds again.
	Reentrant bool `json:"reentrant"`
}

// Init is the harness's first message to a client program.
type Init struct {
	Type      string            `json:"type"`
	ID        int64             `json:"id"`
	Process   int               `json:"process"`
	Nodes     []Node            `json:"nodes"`
	KeyPrefix string            `json:"key_prefix"`
	TTLMS     int64             `json:"ttl_ms"`
	Options   map[string]string `json:"options"`
}

// Request is an acquire, release or extend.
type Request struct {
	Type  string `json:"type"`
	ID    int64  `json:"id"`
	Key   string `json:"key"`
	Value string `json:"value,omitempty"`
	TTLMS int64  `json:"ttl_ms,omitempty"`
}

// Reply is anything a client writes: a reply to a request (InReplyTo set) or an unsolicited event.
// Pointer fields tell a field that is absent from one that is zero.
type Reply struct {
	Type         string        `json:"type"`
	InReplyTo    *int64        `json:"in_reply_to"`
	Library      string        `json:"library"`
	Version      string        `json:"version"`
	Capabilities *Capabilities `json:"capabilities"`
	Key          string        `json:"key"`
	Value        string        `json:"value"`
	Token        *int64        `json:"token"`
	ValidityMS   *float64      `json:"validity_ms"`
	Depth        int           `json:"depth"`
	Code         string        `json:"code"`
	Text         string        `json:"text"`
}

// Error codes a client may answer with, and whether each is definite: the request certainly had
// no effect on the lock. Any other code is indefinite ("when in doubt, indefinite").
const (
	CodeHeld        = "held"         // acquire: another client holds the key
	CodeNotAcquired = "not_acquired" // acquire: refused for another definite reason (no quorum)
	CodeLost        = "lost"         // release/extend: the lease was no longer held
	CodeUnavailable = "unavailable"  // no request left the client (no connection could be made)
	CodeTimeout     = "timeout"      // a request may have been applied: outcome unknown
	CodeCrashed     = "crashed"      // the library failed in a way that leaves the outcome unknown
	CodeBadRequest  = "bad_request"  // the client could not understand the request (definite)
)

// Definite reports whether an error code means the request certainly had no effect.
func Definite(code string) bool {
	switch code {
	case CodeHeld, CodeNotAcquired, CodeLost, CodeUnavailable, CodeBadRequest:
		return true
	}
	return false
}

// Encode writes m as one JSON line.
func Encode(w io.Writer, m any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Reader reads a client's lines, one message each, with MaxLine as the longest line.
type Reader struct {
	r *bufio.Reader
}

// NewReader reads messages from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 4096)} }

// ErrLineTooLong is a line longer than MaxLine.
var ErrLineTooLong = fmt.Errorf("line longer than %d bytes", MaxLine)

// Line returns the next line without its newline. At the end of the input it returns io.EOF (also
// after a last line without a newline: a message is complete only with its newline).
func (r *Reader) Line() ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.r.ReadSlice('\n')
		if len(line)+len(chunk) > MaxLine+1 {
			return nil, ErrLineTooLong
		}
		line = append(line, chunk...)
		if err == nil {
			return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")), nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return nil, fmt.Errorf("the last line has no newline: %q", clip(line))
		}
		return nil, err
	}
}

// Decode parses one line strictly: one JSON object, no unknown field, a known type, and the fields
// that type requires well formed. It does not know which request a reply answers; the caller
// checks that (see Check).
func Decode(line []byte) (Reply, error) {
	var m Reply
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Reply{}, fmt.Errorf("not a protocol message (%v): %q", err, clip(line))
	}
	if dec.More() {
		return Reply{}, fmt.Errorf("more than one JSON value on a line: %q", clip(line))
	}
	if err := m.wellFormed(); err != nil {
		return Reply{}, fmt.Errorf("%w: %q", err, clip(line))
	}
	return m, nil
}

// wellFormed checks the fields of m that its type requires, whatever request it answers.
func (m Reply) wellFormed() error {
	switch m.Type {
	case TypeInitOK:
		if m.Library == "" || m.Capabilities == nil {
			return errors.New("init_ok needs library and capabilities")
		}
	case TypeAcquireOK, TypeExtendOK, TypeReleaseOK, TypeError:
	case TypeRenewed, TypeLost:
		if m.InReplyTo != nil {
			return fmt.Errorf("%s is an event and answers no request: drop in_reply_to", m.Type)
		}
		if m.Key == "" || m.Value == "" {
			return fmt.Errorf("%s needs key and value", m.Type)
		}
	case "":
		return errors.New("message without a type")
	default:
		return fmt.Errorf("unknown message type %q", m.Type)
	}
	if m.Type != TypeRenewed && m.Type != TypeLost && m.InReplyTo == nil {
		return fmt.Errorf("%s needs in_reply_to", m.Type)
	}
	if m.Type == TypeError && m.Code == "" {
		return errors.New("error needs a code")
	}
	if v := m.ValidityMS; v != nil && (math.IsNaN(*v) || *v < 0 || *v > maxValidityMS) {
		return fmt.Errorf("validity_ms %v is not a duration in [0, a day]", *v)
	}
	if len(m.Value) > maxValueLength {
		return fmt.Errorf("value longer than %d bytes", maxValueLength)
	}
	if m.Depth < 0 {
		return fmt.Errorf("negative depth %d", m.Depth)
	}
	return nil
}

// Check tells whether reply r is a well-formed answer to req under the capabilities caps.
func Check(req Request, r Reply, caps Capabilities) error {
	ok := req.Type + "_ok"
	switch {
	case r.Type == TypeError:
		return nil
	case r.Type != ok:
		return fmt.Errorf("%s %d answered with %s", req.Type, req.ID, r.Type)
	}
	if r.Key != "" && r.Key != req.Key {
		return fmt.Errorf("%s of key %q answered for key %q", req.Type, req.Key, r.Key)
	}
	switch req.Type {
	case TypeAcquire:
		if r.Value == "" {
			return fmt.Errorf("acquire_ok without a value: a lease must be named to be released")
		}
		if caps.Token && r.Token == nil {
			return fmt.Errorf("acquire_ok without the token the client's capabilities promise")
		}
	case TypeExtend:
		if r.Value != "" && r.Value != req.Value {
			return fmt.Errorf("extend of lease %q answered for lease %q", req.Value, r.Value)
		}
	}
	if (req.Type == TypeAcquire || req.Type == TypeExtend) && caps.Validity && r.ValidityMS == nil {
		return fmt.Errorf("%s without the validity_ms the client's capabilities promise", ok)
	}
	if r.Token != nil && *r.Token < 0 {
		return fmt.Errorf("negative token %d", *r.Token)
	}
	// A depth would let overlapping holds pass as re-entries, and a token would be judged as a
	// fencing token: only a client that declared them may give them.
	if r.Depth != 0 && (!caps.Reentrant || req.Type != TypeAcquire) {
		return fmt.Errorf("%s with depth %d from a client without the reentrant capability", r.Type, r.Depth)
	}
	if r.Token != nil && (!caps.Token || req.Type != TypeAcquire) {
		return fmt.Errorf("%s with a token from a client without the token capability", r.Type)
	}
	return nil
}

// clip shortens a line for an error message.
func clip(b []byte) string {
	s := string(b)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}
