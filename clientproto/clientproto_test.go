package clientproto

import (
	"strings"
	"testing"
)

// Decode takes exactly one known, well-formed message per line and names what is wrong otherwise.
func TestDecode(t *testing.T) {
	for line, want := range map[string]string{
		`{"type":"acquire_ok","in_reply_to":1,"value":"v","validity_ms":1500.5}`:                          "",
		`{"type":"renewed","key":"k","value":"v"}`:                                                        "",
		`{"type":"init_ok","in_reply_to":0,"library":"x","version":"1","capabilities":{"validity":true}}`: "",
		`hello`: "not a protocol message",
		`{"type":"acquire_ok","in_reply_to":1,"value":"v"} {}`:                             "more than one JSON value",
		`{"type":"acquire_ok","in_reply_to":1,"value":"v","validty_ms":3}`:                 "unknown field",
		`{"type":"acquire_ok","value":"v"}`:                                                "needs in_reply_to",
		`{"type":"acquire_ok","in_reply_to":"1","value":"v"}`:                              "not a protocol message",
		`{"type":"acquire_ok","in_reply_to":1,"value":"v","validity_ms":-1}`:               "validity_ms -1",
		`{"type":"granted","in_reply_to":1}`:                                               `unknown message type "granted"`,
		`{"type":"lost","in_reply_to":1,"key":"k","value":"v"}`:                            "answers no request",
		`{"type":"lost","key":"k"}`:                                                        "needs key and value",
		`{"type":"error","in_reply_to":1}`:                                                 "error needs a code",
		`{"type":"init_ok","in_reply_to":0,"library":"x"}`:                                 "needs library and capabilities",
		`{"type":"init_ok","in_reply_to":0,"library":"x","capabilities":{"fencing":true}}`: "unknown field",
	} {
		_, err := Decode([]byte(line))
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", line, err, want)
		}
	}
}

// Check refuses an answer that is not the one the request and the capabilities call for.
func TestCheck(t *testing.T) {
	acq := Request{Type: TypeAcquire, ID: 3, Key: "k"}
	v, tok := 100.0, int64(4)
	for _, c := range []struct {
		name string
		r    Reply
		caps Capabilities
		want string
	}{
		{"ok", Reply{Type: TypeAcquireOK, Value: "v"}, Capabilities{}, ""},
		{"error", Reply{Type: TypeError, Code: CodeHeld}, Capabilities{}, ""},
		{"wrong type", Reply{Type: TypeReleaseOK}, Capabilities{}, "answered with release_ok"},
		{"no value", Reply{Type: TypeAcquireOK}, Capabilities{}, "without a value"},
		{"other key", Reply{Type: TypeAcquireOK, Value: "v", Key: "j"}, Capabilities{}, `for key "j"`},
		{"validity promised", Reply{Type: TypeAcquireOK, Value: "v"}, Capabilities{Validity: true}, "without the validity_ms"},
		{"validity given", Reply{Type: TypeAcquireOK, Value: "v", ValidityMS: &v}, Capabilities{Validity: true}, ""},
		{"token promised", Reply{Type: TypeAcquireOK, Value: "v"}, Capabilities{Token: true}, "without the token"},
		{"token unasked", Reply{Type: TypeAcquireOK, Value: "v", Token: &tok}, Capabilities{}, "without the token capability"},
		{"depth unasked", Reply{Type: TypeAcquireOK, Value: "v", Depth: 2}, Capabilities{}, "without the reentrant capability"},
		{"depth of a reentrant lock", Reply{Type: TypeAcquireOK, Value: "v", Depth: 2}, Capabilities{Reentrant: true}, ""},
	} {
		err := Check(acq, c.r, c.caps)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// Only the codes that certainly had no effect are definite; anything else is not.
func TestDefinite(t *testing.T) {
	for code, want := range map[string]bool{CodeHeld: true, CodeNotAcquired: true, CodeLost: true, CodeUnavailable: true, CodeBadRequest: true, CodeTimeout: false, CodeCrashed: false, "oops": false, "": false} {
		if Definite(code) != want {
			t.Errorf("Definite(%q) = %v", code, !want)
		}
	}
}
