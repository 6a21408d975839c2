package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzDecode holds the fast path to encoding/json: on any line, the decoder accepts exactly what
// the strict encoding/json path accepts, with the same event, and rejects what it rejects with the
// same error. And reading any input as a whole history never panics.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"index":0,"time":1,"type":"invoke","process":0,"f":"acquire","key":"k0"}`,
		`{"index":7,"time":123456789,"type":"ok","process":3,"f":"acquire","key":"k0","value":"p3-1","token":1,"deadline":100123456,"validity":99000000,"nodes":["n1","n2","n3"]}`,
		`{"index":8,"time":9,"type":"fail","process":3,"f":"acquire","key":"k0","error":"held","reason":"held"}`,
		`{"index":9,"time":9,"type":"invoke","process":-1,"f":"kill","nodes":["n1"],"fault":"restart","effect":"fault"}`,
		`{"index":0,"time":0,"type":"invoke","process":-2,"f":"run","plan":{"lock":"single","workload":"mutex","keys":["k0"],"clients":5,"ttl":1,"time_limit":2,"recovery":3,"seed":4}}`,
		`{"index":1,"type":"info","process":-1,"f":"clock","offsets":{"n1":-5}}`,
		`{"index":1,"type":"ok","process":0,"f":"write","value":"3","token":2,"guard":"fencing"}`,
		` { "index" : -0 , "nodes" : [ ] } `,
		`{"index":1.0}`, `{"index":1e3}`, `{"index":01}`, `{"index":99999999999999999999}`,
		`{"Index":1}`, `{"index":1,"index":2}`, `{"nodes":null}`, `{"value":"a\"b"}`, `{"value":"é"}`,
		`{"dedline":5}`, `{"index":0} {"index":1}`, `[1,2]`, `{"index":0`, `{}`, `null`, "",
		`{"ind\u0065x":1}`, `{"index\"":1}`, `{"in\"dex":1}`, "{\"f\":\"a\x7fb\"}", "{\"f\":\"a\x1fb\"}",
		"{\"f\":\"a\x80b\"}", "{\"ind\xe9x\":1}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got, want Event
		gerr := newDecoder().decode(b, &got)
		werr := decodeEvent(b, &want)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%q: decoder says %v, encoding/json %v", b, gerr, werr)
		}
		if gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("%q: decoder error %q, encoding/json %q", b, gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decoder read %+v, encoding/json %+v", b, got, want)
		}
		ReadLog(bytes.NewReader(b)) // must not panic, whatever the input
		ReadLog(bytes.NewReader(append(append([]byte(nil), b...), '\n')))
	})
}

// The fast path decodes what the Recorder writes, field for field as encoding/json does.
func TestDecodeRoundTripsRecordedEvents(t *testing.T) {
	events := []Event{
		{Index: 1, Time: 2, Type: OK, Process: 3, F: FAcquire, Key: "k0", Value: "p3-1", Token: 4, Deadline: 5, Validity: 6, Nodes: []string{"n1", "n2"}},
		{Index: 2, Time: 3, Type: Fail, Process: 3, F: FAcquire, Key: "k0", Error: "held", Reason: ReasonHeld},
		{Index: 3, Time: -4, Type: Info, Process: NemesisProcess, F: "kill", Fault: "restart", Effect: EffectFault, Nodes: []string{"n1"}},
		{Index: 4, Type: Invoke, Process: HarnessProcess, F: FRun, Plan: &Plan{Lock: "single", Keys: []string{"k0"}}},
		{Index: 5, Type: OK, Process: 1, F: FWrite, Value: "7", Guard: "fencing", Error: "a \"quoted\" error\n"},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range events {
		enc.Encode(e)
	}
	l, err := ReadLog(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(l.Events, events) {
		t.Fatalf("read back\n%+v\nwant\n%+v", l.Events, events)
	}
}

// Every field the fast path knows, as the recorder writes it, is read by the fast path itself, not
// handed to encoding/json: a name it fails to match would cost every history its speed silently.
func TestFastPathReadsEveryRecordedField(t *testing.T) {
	e := Event{Index: 12, Time: 3456789012, Type: OK, Process: 7, F: FAcquire, Key: "k0", Value: "p7-3",
		Token: 9, Deadline: 4456789012, Validity: 999000000, Depth: 2, Nodes: []string{"n1", "n2"},
		Fault: "restart", Effect: EffectFault, Guard: "fencing", Reason: ReasonHeld, Error: "held"}
	line, _, err := appendEvent(nil, &e)
	if err != nil {
		t.Fatal(err)
	}
	line = bytes.TrimSpace(line)
	var got Event
	if !newDecoder().fast(line, &got) {
		t.Fatalf("the fast path handed %s to encoding/json", line)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("fast path read %+v, want %+v", got, e)
	}
	if n := strings.Count(string(line), `":`); n != 17 {
		t.Fatalf("the line has %d fields, want all 17 the fast path reads: %s", n, line)
	}
}

// A field is named by its first letter (fieldAt) or as the one predicted (quotedAt): both take
// exactly its name, near a line's end or not, and no longer, shorter or other-case name for it.
func TestFieldNamesAgree(t *testing.T) {
	d := newDecoder()
	for f, name := range fieldNames() {
		if len(name) > 14 || name[0] < 'a' || name[0] > 'z' {
			t.Fatalf("field name %q: quotedAt compares 16 bytes, the quotes included, and fieldAt looks names up by a lower-case first letter", name)
		}
		for _, text := range []string{name, name + "x", name[:len(name)-1], strings.ToUpper(name[:1]) + name[1:]} {
			// A long line is compared by words, a short one (near the end of a line) by bytes.
			tail := `:1234567890123456}`
			if len(name)%2 == 0 {
				tail = `:1}`
			}
			line := []byte(`"` + text + `"` + tail)
			want, wantEnd := noField, 0
			if text == name {
				want, wantEnd = f, len(name)+2
			}
			if got, end := d.fieldAt(line, 0); got != want || (got != noField && end != wantEnd) {
				t.Errorf("fieldAt(%s) = %d, %d; want %d, %d", line, got, end, want, wantEnd)
			}
			if end, ok := d.quotedAt(line, 0, f); ok != (want == f) || (ok && end != wantEnd) {
				t.Errorf("quotedAt(%s, %s) = %d, %v; want %d, %v", line, name, end, ok, wantEnd, want == f)
			}
		}
	}
}

// BenchmarkDecode measures the reader alone on a recorded-looking history (set LOCKPICK_HISTORY to
// a file to read that instead).
func BenchmarkDecode(b *testing.B) {
	line := `{"index":7,"time":123456789,"type":"ok","process":3,"f":"acquire","key":"k0","value":"p3-1","token":1,"deadline":100123456,"validity":99000000,"nodes":["n1","n2","n3"]}` + "\n" +
		`{"index":8,"time":123456999,"type":"fail","process":4,"f":"acquire","key":"k0","error":"held","reason":"held"}` + "\n"
	data := []byte(strings.Repeat(line, 50_000))
	if p := os.Getenv("LOCKPICK_HISTORY"); p != "" {
		var err error
		if data, err = os.ReadFile(p); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		s := NewScanner(bytes.NewReader(data))
		for s.Scan() {
		}
		if s.Err() != nil {
			b.Fatal(s.Err())
		}
	}
}

// Strings that share a slot of the decoder's cache (same length, first and last byte) still decode
// to their own values, line after line.
func TestDecodeCacheKeepsCollidingStringsApart(t *testing.T) {
	keys := []string{"kab", "kzb", "kab", "k-b", "kzb", "kab"}
	var buf bytes.Buffer
	for i, k := range keys {
		fmt.Fprintf(&buf, `{"index":%d,"type":"invoke","process":0,"f":"acquire","key":%q,"error":%q}`+"\n", i, k, k[1:])
	}
	l, err := ReadLog(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range l.Events {
		if e.Key != keys[i] || e.Error != keys[i][1:] {
			t.Fatalf("line %d: key %q error %q, want %q and %q", i+1, e.Key, e.Error, keys[i], keys[i][1:])
		}
	}
}

// plainInt, eight digits at a time or one, reads what strconv reads: numbers of every length
// around the eight-digit step, with signs, leading zeros and what may follow a number on a line.
func TestPlainIntAgreesWithStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	digits := "0123456789"
	for range 200_000 {
		var num strings.Builder
		if rng.IntN(4) == 0 {
			num.WriteByte('-')
		}
		for range rng.IntN(21) {
			num.WriteByte(digits[rng.IntN(10)])
		}
		after := []string{"", ",", "}", ".5", "e3", "x", "]", " "}[rng.IntN(8)]
		// What follows on a real line, often eight bytes or more, so that the number is read eight
		// digits at a time; random bytes too, digits among them.
		tail := []string{"", `,"time":12}` + "\n", string(rune('0' + rng.IntN(80))), "\xfa\xff\x00,1234567"}[rng.IntN(4)]
		if after == "" {
			tail = ""
		}
		line := []byte(num.String() + after + tail)
		v, i, ok := plainInt(line, 0)
		s := num.String()
		digitsOnly := strings.TrimPrefix(s, "-")
		want, err := strconv.ParseInt(s, 10, 64)
		wantOK := err == nil && len(digitsOnly) <= 18 && (digitsOnly[0] != '0' || len(digitsOnly) == 1) &&
			!strings.HasPrefix(after, ".") && !strings.HasPrefix(after, "e") // a fraction or exponent is not plain
		if ok != wantOK || (ok && (v != want || i != len(s))) {
			t.Fatalf("plainInt(%q) = %d, %d, %v; want %d, %d, %v", line, v, i, ok, want, len(s), wantOK)
		}
	}
}
