package history

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// randomEvent draws an event whose fields are each empty or not, with strings that need escaping
// now and then.
func randomEvent(rng *rand.Rand) Event {
	strs := []string{"", "acquire", "lockpick:0", "n1", "VXQZSYXLUK26FDT3CKNRSXDGZK:1", `say "hi"`, `back\slash`, "<tag>&", "line\nbreak\t", "caf\u00e9", "\u2028", "bad \xff utf8", "\x01"}
	s := func() string { return strs[rng.IntN(len(strs))] }
	n := func() int64 {
		if rng.IntN(2) == 0 {
			return 0
		}
		return rng.Int64N(1<<40) - 1<<39
	}
	e := Event{Index: n(), Time: n(), Type: Type(s()), Process: int(n() % 100), F: s(), Key: s(), Value: s(), Token: n(), Deadline: n(),
		Validity: n(), Depth: int(n() % 3), Fault: s(), Effect: s(), Guard: s(), Reason: s(), Note: s(), Stderr: s(), Error: s()}
	for range rng.IntN(3) {
		e.Nodes = append(e.Nodes, s())
	}
	switch rng.IntN(8) {
	case 0:
		e.Roles = map[string]string{"n1": "primary", s(): s()}
	case 1:
		e.Offsets = map[string]int64{"n1": n()}
	case 2:
		e.Plan = &Plan{Lock: s(), Keys: []string{s()}, Clients: 3}
	case 3:
		e.Nodes = []string{} // empty, not nil: omitted all the same
	}
	return e
}

// The recorder's encoder writes what encoding/json writes, byte for byte.
func TestAppendEventIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		e := randomEvent(rng)
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(e); err != nil {
			t.Fatal(err)
		}
		got, plain, err := appendEvent(nil, &e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("event %d:\n got %s\nwant %s", i, got, want.Bytes())
		}
		if plain != readsBackAsIs(&e) {
			t.Fatalf("event %d: appendEvent says reading it back gives it as it is: %v, want %v\n%s", i, plain, !plain, got)
		}
	}
}

// readsBackAsIs is what the tap once asked of every event before it took it as it is (no plan,
// roles or offsets, every string valid UTF-8): the encoder must find the same on its way.
func readsBackAsIs(e *Event) bool {
	if e.Plan != nil || e.Roles != nil || e.Offsets != nil {
		return false
	}
	strs := []string{string(e.Type), e.F, e.Key, e.Value, e.Fault, e.Effect, e.Guard, e.Reason, e.Note, e.Stderr, e.Error}
	for _, s := range append(strs, e.Nodes...) {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

func BenchmarkAppendEvent(b *testing.B) {
	e := Event{Index: 123456, Time: 987654321, Type: OK, Process: 7, F: FAcquire, Key: "lockpick:0", Value: "VXQZSYXLUK26FDT3CKNRSXDGZK", Deadline: 2987654321, Validity: 1999000000, Nodes: []string{"n1"}}
	b.Run("fast", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _, _ = appendEvent(buf[:0], &e)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for b.Loop() {
			buf.Reset()
			_ = enc.Encode(e)
		}
	})
}
