package checker

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// checkText reads a history written as JSON lines, as `lockpick check` does, and checks it.
func checkText(lines ...string) (*Result, error) {
	l, err := history.ReadLog(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	if err != nil {
		return nil, err
	}
	return CheckLog(l, Options{})
}

// Lines of a small valid history: p0 acquires k, holds it, releases it.
const (
	lAcq    = `{"index":0,"time":1000,"type":"invoke","process":0,"f":"acquire","key":"k"}`
	lAcqOK  = `{"index":1,"time":2000,"type":"ok","process":0,"f":"acquire","key":"k","value":"a","deadline":900000}`
	lRel    = `{"index":2,"time":3000,"type":"invoke","process":0,"f":"release","key":"k","value":"a"}`
	lRelOK  = `{"index":3,"time":4000,"type":"ok","process":0,"f":"release","key":"k","value":"a"}`
	planRun = `{"index":0,"time":0,"type":"invoke","process":-2,"f":"run","plan":{"lock":"single","workload":"mutex","keys":["k"],"clients":1,"ttl":1000000,"time_limit":5000,"recovery":0,"seed":1}}`
)

// Every broken assumption is an error naming its line, never a verdict.
func TestValidationNamesTheLine(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
		line  int
		want  string
	}{
		{"unknown type", []string{lAcq, `{"index":1,"time":2000,"type":"done","process":0,"f":"acquire"}`}, 2, `unknown event type "done"`},
		{"unknown op", []string{lAcq, lAcqOK, `{"index":2,"time":2500,"type":"invoke","process":0,"f":"renew","key":"k"}`}, 3, `unknown operation "renew"`},
		{"op in another case", []string{`{"index":0,"time":1,"type":"invoke","process":0,"f":"Acquire","key":"k"}`}, 1, `unknown operation "Acquire"`},
		{"duplicate index", []string{lAcq, strings.Replace(lAcqOK, `"index":1`, `"index":0`, 1)}, 2, "index 0 repeats that of line 1"},
		{"index back", []string{lAcq, lAcqOK, strings.Replace(lRel, `"index":2`, `"index":0`, 1), lRelOK}, 3, "index 0 goes back from 1 on line 2"},
		{"process time back", []string{lAcq, lAcqOK, `{"index":2,"time":1500,"type":"invoke","process":0,"f":"release","key":"k","value":"a"}`}, 3, "process 0's event at 1.5µs is before its previous event at 2µs on line 2"},
		{"time back", []string{lAcq, lAcqOK, `{"index":2,"time":1500,"type":"invoke","process":4,"f":"acquire","key":"k"}`}, 3, "time 1.5µs goes back from 2µs on line 2"},
		{"completion without invoke", []string{`{"index":0,"time":1,"type":"ok","process":0,"f":"acquire","key":"k"}`}, 1, "no operation in flight"},
		{"completion of another op", []string{lAcq, `{"index":1,"time":2000,"type":"ok","process":0,"f":"release","key":"k"}`}, 2, "its operation in flight is the acquire of line 1"},
		{"two in flight", []string{lAcq, `{"index":1,"time":2000,"type":"invoke","process":0,"f":"release","key":"k"}`}, 2, "still in flight"},
		{"second run", []string{planRun, strings.Replace(lAcq, `"index":0`, `"index":1`, 1), strings.Replace(planRun, `"index":0,"time":0`, `"index":2,"time":5000`, 1)}, 3, "a second run begins (the first began on line 1)"},
		{"concatenated", []string{planRun, `{"index":1,"time":6000,"type":"ok","process":-2,"f":"run"}`, planRun}, 3, "after the run ended on line 2"},
		{"run not first", []string{lAcq, strings.Replace(planRun, `"index":0,"time":0`, `"index":1,"time":1000`, 1)}, 2, "the run begins after other events"},
		{"run fails", []string{planRun, `{"index":1,"time":6000,"type":"fail","process":-2,"f":"run"}`}, 2, "the run completed with fail"},
		{"nemesis without effect", []string{`{"index":0,"time":1,"type":"invoke","process":-1,"f":"kill","nodes":["n1"]}`}, 1, `has effect ""`},
		{"nemesis effect changes", []string{`{"index":0,"time":1,"type":"invoke","process":-1,"f":"kill","effect":"fault"}`, `{"index":1,"time":2,"type":"info","process":-1,"f":"kill","effect":"heal"}`}, 2, "completed \"kill\" as a heal"},
		{"nemesis completion alone", []string{`{"index":0,"time":1,"type":"info","process":-1,"f":"kill","effect":"fault"}`}, 1, "no such operation in flight"},
		{"negative deadline", []string{lAcq, strings.Replace(lAcqOK, `900000`, `-5`, 1)}, 2, "negative deadline"},
		{"negative validity", []string{lAcq, strings.Replace(lAcqOK, `"deadline":900000`, `"deadline":900000,"validity":-3`, 1)}, 2, "negative validity"},
		{"lease ended before asked", []string{lAcq, strings.Replace(lAcqOK, `900000`, `500`, 1)}, 2, "before its acquire was invoked"},
		{"unknown reason", []string{lAcq, `{"index":1,"time":2000,"type":"fail","process":0,"f":"acquire","key":"k","reason":"busy"}`}, 2, `unknown reason "busy"`},
		{"key outside the plan", []string{planRun, `{"index":1,"time":1,"type":"invoke","process":0,"f":"acquire","key":"other"}`}, 2, `not among the plan's keys`},
		{"negative plan", []string{strings.Replace(planRun, `"time_limit":5000`, `"time_limit":-1`, 1)}, 1, "time_limit is negative"},
		{"harness op", []string{`{"index":0,"time":1,"type":"invoke","process":-2,"f":"acquire"}`}, 1, `unknown operation "acquire": its operations are run and final`},
		{"unknown process", []string{`{"index":0,"time":1,"type":"invoke","process":-4,"f":"acquire"}`}, 1, "unknown process -4"},
		{"system op", []string{`{"index":0,"time":1,"type":"info","process":-3,"f":"acquire"}`}, 1, `the system (process -3): unknown operation "acquire"`},
		{"system invoke", []string{`{"index":0,"time":1,"type":"invoke","process":-3,"f":"role","nodes":["n2"],"roles":{"n2":"primary"}}`}, 1, "it is an info event"},
		{"role change without roles", []string{`{"index":0,"time":1,"type":"info","process":-3,"f":"role","nodes":["n2"]}`}, 1, "every node whose role changed has its new role"},
		{"role of another node", []string{`{"index":0,"time":1,"type":"info","process":-3,"f":"role","nodes":["n2"],"roles":{"n3":"primary"}}`}, 1, "gives node n3 a role but its nodes are"},
		{"unknown role", []string{`{"index":0,"time":1,"type":"info","process":-3,"f":"role","nodes":["n2"],"roles":{"n2":"captain"}}`}, 1, `node n2 has unknown role "captain"`},
		{"role change with a key", []string{`{"index":0,"time":1,"type":"info","process":-3,"f":"role","key":"k","nodes":["n2"],"roles":{"n2":"primary"}}`}, 1, "names nodes, roles and a note only"},
		{"client with roles", []string{`{"index":0,"time":1,"type":"invoke","process":0,"f":"acquire","key":"k","nodes":["n1"],"roles":{"n1":"primary"}}`}, 1, "process 0's event carries roles"},
		{"client with a note", []string{`{"index":0,"time":1,"type":"invoke","process":0,"f":"acquire","key":"k","note":"x"}`}, 1, "carries a note"},
		{"nemesis role of another node", []string{`{"index":0,"time":1,"type":"invoke","process":-1,"f":"kill","effect":"fault","nodes":["n1"],"roles":{"n2":"primary"}}`}, 1, "gives node n2 a role"},
		{"key changes", []string{lAcq, strings.Replace(lAcqOK, `"key":"k"`, `"key":"j"`, 1)}, 2, `completed for key "j"`},
	}
	for _, c := range cases {
		r, err := checkText(c.lines...)
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: want a validation error, got %v (verdict %v)", c.name, err, r)
			continue
		}
		if ve.Line != c.line || !strings.Contains(ve.Msg, c.want) || !strings.HasPrefix(err.Error(), "line ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %q, want line %d and %q", c.name, err, c.line, c.want)
		}
	}
}

// A nemesis event may say in its note how the fault was applied (the failover's stall, aimed with
// the primary's writes held).
func TestValidationTakesANemesisNote(t *testing.T) {
	note := `"note":"client writes on n1 held (CLIENT PAUSE WRITE, at most 500ms) from a look that found no lease on any node until the stall was in place"`
	_, err := checkText(
		`{"index":0,"time":1,"type":"invoke","process":-1,"f":"stall n2/n1 n3/n1","effect":"fault","fault":"failover","nodes":["n1"],`+note+`}`,
		`{"index":1,"time":2,"type":"info","process":-1,"f":"stall n2/n1 n3/n1","effect":"fault","fault":"failover","nodes":["n1"],`+note+`}`)
	if err != nil {
		t.Fatalf("a nemesis event with a note was refused: %v", err)
	}
}

// Blank lines do not shift the line an error names.
func TestValidationCountsBlankLines(t *testing.T) {
	_, err := checkText(lAcq, "", "   ", `{"index":1,"time":2000,"type":"ok","process":0,"f":"renew"}`)
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Line != 4 {
		t.Fatalf("want an error on line 4, got %v", err)
	}
	// Check on events alone takes event i to be on line i+1.
	_, err = Check([]history.Event{{Type: history.Invoke, F: "renew"}}, Options{})
	if !errors.As(err, &ve) || ve.Line != 1 {
		t.Fatalf("want an error on line 1, got %v", err)
	}
}

// A malformed line is the reader's error, with its line; a truncated last line is a note.
func TestTruncatedLastLineIsANote(t *testing.T) {
	if _, err := checkText(lAcq, "{oops", lAcqOK); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("malformed line: want an error naming line 2, got %v", err)
	}
	l, err := history.ReadLog(strings.NewReader(strings.Join([]string{lAcq, lAcqOK, lRel, lRelOK, `{"index":4,"time":5000,"ty`}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	r, err := CheckLog(l, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid != Valid || !containsSubstring(r.Notes, "the last line (line 5) was cut short") || !strings.Contains(r.Summary(), "line 5") {
		t.Fatalf("want valid with a note on line 5, got %s, notes %v", r.Valid, r.Notes)
	}
}

// An overlap hidden behind an operation the checker does not know is no longer a silent valid.
func TestUnknownOperationCannotHideAnOverlap(t *testing.T) {
	lines := []string{
		lAcq, lAcqOK,
		`{"index":2,"time":2100,"type":"invoke","process":1,"f":"Acquire","key":"k"}`,
		`{"index":3,"time":2200,"type":"ok","process":1,"f":"Acquire","key":"k","value":"b","deadline":900000}`,
		strings.Replace(lRel, `"index":2`, `"index":4`, 1), strings.Replace(lRelOK, `"index":3`, `"index":5`, 1),
	}
	if _, err := checkText(lines...); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("want an error naming line 3, got %v", err)
	}
}

// A Sentinel failover's history validates: nemesis events naming roles, stalls and isolations of
// links, and the system's role change (process -3) between them; the role change is no client and
// grants no hold.
func TestValidationAcceptsRolesAndFailovers(t *testing.T) {
	r, err := checkText(
		strings.Replace(planRun, `"lock":"single"`, `"lock":"sentinel"`, 1),
		`{"index":1,"time":10,"type":"invoke","process":-1,"f":"stall n2/n1 n3/n1","nodes":["n1","n2","n3"],"roles":{"n1":"primary","n2":"replica","n3":"replica"},"fault":"failover","effect":"fault"}`,
		`{"index":2,"time":20,"type":"info","process":-1,"f":"stall n2/n1 n3/n1","nodes":["n1","n2","n3"],"fault":"failover","effect":"fault"}`,
		strings.Replace(strings.Replace(lAcq, `"index":0`, `"index":3`, 1), `"time":1000`, `"time":30`, 1),
		strings.Replace(strings.Replace(lAcqOK, `"index":1`, `"index":4`, 1), `"deadline":900000`, `"deadline":900000,"nodes":["n1"]`, 1),
		`{"index":5,"time":2100,"type":"invoke","process":-1,"f":"kill","nodes":["n1"],"roles":{"n1":"primary"},"fault":"failover","effect":"fault"}`,
		`{"index":6,"time":2200,"type":"info","process":-1,"f":"kill","nodes":["n1"],"roles":{"n1":"primary"},"fault":"failover","effect":"fault"}`,
		`{"index":7,"time":2300,"type":"info","process":-3,"f":"role","nodes":["n1","n2"],"roles":{"n1":"replica","n2":"primary"},"note":"+switch-master from s1: lockpick n1 n2; roles: n2 primary, n1 replica"}`,
		`{"index":8,"time":2400,"type":"invoke","process":-1,"f":"isolate s1/n2 s2/n2 s3/n2","nodes":["n2","s1","s2","s3"],"roles":{"n2":"primary","s1":"sentinel","s2":"sentinel","s3":"sentinel"},"fault":"failover","effect":"fault"}`,
		`{"index":9,"time":2500,"type":"info","process":-1,"f":"isolate s1/n2 s2/n2 s3/n2","nodes":["n2","s1","s2","s3"],"fault":"failover","effect":"fault"}`,
		strings.Replace(strings.Replace(lRel, `"index":2`, `"index":10`, 1), `"time":3000`, `"time":3000`, 1),
		strings.Replace(lRelOK, `"index":3`, `"index":11`, 1),
		`{"index":12,"time":6000,"type":"ok","process":-2,"f":"run"}`,
	)
	if err != nil {
		t.Fatalf("a failover's history is refused: %v", err)
	}
	if r == nil {
		t.Fatal("no result")
	}
}

// Two leases from two primaries across a failover: the cause names the fault on the first primary
// and the promotion of the second, from the system's role change.
func TestFailoverViolationNamesThePromotion(t *testing.T) {
	r, err := checkText(
		strings.Replace(planRun, `"lock":"single"`, `"lock":"sentinel"`, 1),
		`{"index":1,"time":10,"type":"invoke","process":-1,"f":"stall n2/n1 n3/n1","nodes":["n1"],"roles":{"n1":"primary"},"fault":"failover","effect":"fault"}`,
		`{"index":2,"time":20,"type":"info","process":-1,"f":"stall n2/n1 n3/n1","nodes":["n1"],"fault":"failover","effect":"fault"}`,
		`{"index":3,"time":30,"type":"invoke","process":0,"f":"acquire","key":"k"}`,
		`{"index":4,"time":40,"type":"ok","process":0,"f":"acquire","key":"k","value":"a","deadline":900000,"nodes":["n1"]}`,
		`{"index":5,"time":50,"type":"invoke","process":-1,"f":"kill","nodes":["n1"],"roles":{"n1":"primary"},"fault":"failover","effect":"fault"}`,
		`{"index":6,"time":60,"type":"info","process":-1,"f":"kill","nodes":["n1"],"roles":{"n1":"primary"},"fault":"failover","effect":"fault"}`,
		`{"index":7,"time":2500,"type":"info","process":-3,"f":"role","nodes":["n1","n2"],"roles":{"n1":"replica","n2":"primary"},"note":"+switch-master from s1: lockpick n1 n2"}`,
		`{"index":8,"time":2600,"type":"invoke","process":1,"f":"acquire","key":"k"}`,
		`{"index":9,"time":2700,"type":"ok","process":1,"f":"acquire","key":"k","value":"b","deadline":900000,"nodes":["n2"]}`,
		`{"index":10,"time":3000,"type":"invoke","process":0,"f":"release","key":"k","value":"a"}`,
		`{"index":11,"time":3100,"type":"fail","process":0,"f":"release","key":"k","value":"a"}`,
		`{"index":12,"time":3200,"type":"invoke","process":1,"f":"release","key":"k","value":"b"}`,
		`{"index":13,"time":3300,"type":"ok","process":1,"f":"release","key":"k","value":"b"}`,
		`{"index":14,"time":6000,"type":"ok","process":-2,"f":"run"}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid != Invalid || len(r.Violations) != 1 {
		t.Fatalf("valid %v with %d violations, want one violation", r.Valid, len(r.Violations))
	}
	v := r.Violations[0]
	for _, want := range []string{"n1 granted p0's lease", "; failover kill n1 at 0.000s; ", "n2 was promoted to primary (announced at", "granted p1's at"} {
		if !strings.Contains(v.Cause, want) {
			t.Errorf("cause %q lacks %q", v.Cause, want)
		}
	}
	if len(v.Roles) != 1 || v.Roles[0].Roles["n2"] != "primary" {
		t.Errorf("violation's role changes %v, want n2's promotion", v.Roles)
	}
}
