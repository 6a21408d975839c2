package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Hand-made histories of each class, checked as a user would: `lockpick check FILE` and
// `lockpick check DIR`, judged by exit code and output.
func TestCheckHandMadeHistories(t *testing.T) {
	t.Parallel()
	bin := build(t)
	const (
		run    = `{"index":0,"time":0,"type":"invoke","process":-2,"f":"run","plan":{"lock":"single","workload":"mutex","keys":["k"],"clients":2,"ttl":1000000000,"time_limit":8000000000,"recovery":2000000000,"seed":1}}`
		acq0   = `{"index":1,"time":1000,"type":"invoke","process":0,"f":"acquire","key":"k"}`
		ok0    = `{"index":2,"time":2000,"type":"ok","process":0,"f":"acquire","key":"k","value":"a","deadline":900000000}`
		acq1   = `{"index":3,"time":3000,"type":"invoke","process":1,"f":"acquire","key":"k"}`
		ok1    = `{"index":4,"time":4000,"type":"ok","process":1,"f":"acquire","key":"k","value":"b","deadline":900000000}`
		rel0   = `{"index":5,"time":5000,"type":"invoke","process":0,"f":"release","key":"k","value":"a"}`
		relOK0 = `{"index":6,"time":6000,"type":"ok","process":0,"f":"release","key":"k","value":"a"}`
		fail1  = `{"index":4,"time":4000,"type":"fail","process":1,"f":"acquire","key":"k","reason":"held"}`
		lost0  = `{"index":6,"time":6000,"type":"fail","process":0,"f":"release","key":"k","value":"a","reason":"lost"}`
		done   = `{"index":7,"time":10000000000,"type":"ok","process":-2,"f":"run"}`
	)
	cases := []struct {
		name  string
		lines []string
		code  int
		want  string // in stdout for a verdict, in the one-line stderr for 255
	}{
		{"valid", []string{run, acq0, ok0, acq1, fail1, rel0, relOK0, done}, 0, "verdict: VALID"},
		{"overlap", []string{run, acq0, ok0, acq1, ok1, rel0, relOK0, done}, 1, "verdict: INVALID: 1 pair of overlapping holds\n"},
		{"early lease loss", []string{run, acq0, ok0, acq1, fail1, rel0, lost0, done}, 1, "verdict: INVALID: 1 early lease loss\nfirst finding: early lease loss at 0.000s"},
		{"empty", nil, 2, "unknown because the history is empty"},
		{"blank lines only", []string{"", "  "}, 2, "unknown because the history is empty"},
		{"killed", []string{run, acq0, ok0, acq1, fail1, rel0, relOK0}, 2, "unknown because the run was killed at 0.0s of 10.0s"},
		{"interrupted", []string{run, acq0, ok0, rel0, relOK0, `{"index":7,"time":3000000000,"type":"info","process":-2,"f":"run","error":"interrupted"}`}, 2,
			"unknown because the run was cut short at 3.0s of 10.0s (interrupted): re-run it without interrupting it"},
		{"truncated last line", []string{run, acq0, ok0, acq1, fail1, rel0, relOK0, done, `{"index":8,"ti`}, 0, "the last line (line 9) was cut short"},
		{"unknown operation", []string{run, acq0, ok0, strings.ReplaceAll(acq1, "acquire", "renew")}, 255, "line 4: process 1: unknown operation \"renew\""},
		{"duplicate index", []string{run, acq0, strings.Replace(ok0, `"index":2`, `"index":1`, 1)}, 255, "line 3: index 1 repeats that of line 2"},
		{"concatenated", []string{run, acq0, ok0, rel0, relOK0, done, run, acq0}, 255, "line 7: an event after the run ended on line 6"},
		{"malformed line", []string{run, acq0, "{not json", ok0}, 255, "line 3: not a JSON event"},
		{"unknown field", []string{run, acq0, strings.Replace(ok0, "deadline", "dedline", 1)}, 255, `line 3: unknown field "dedline"`},
	}
	for _, c := range cases {
		dir := t.TempDir()
		file := filepath.Join(dir, "history.jsonl")
		text := strings.Join(c.lines, "\n")
		if len(c.lines) > 0 && c.name != "truncated last line" {
			text += "\n" // a killed run's half-written last line has none
		}
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, arg := range []string{file, dir} {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, "check", arg)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			code := exitCode(cmd.Run())
			if code != c.code {
				t.Errorf("%s: check %s exited %d, want %d\nstdout:\n%s\nstderr: %s", c.name, arg, code, c.code, stdout.String(), stderr.String())
				continue
			}
			if c.code == 255 {
				msg := strings.TrimSpace(stderr.String())
				if !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") || !strings.Contains(msg, file) {
					t.Errorf("%s: want one line naming %s and %q, got %q", c.name, file, c.want, msg)
				}
				continue
			}
			if !strings.HasPrefix(stdout.String(), "verdict: ") || !strings.Contains(stdout.String(), c.want) {
				t.Errorf("%s: output does not lead with its verdict or lacks %q:\n%s", c.name, c.want, stdout.String())
			}
			if strings.Contains(stdout.String(), "violations: 0") {
				t.Errorf("%s: output says \"violations: 0\":\n%s", c.name, stdout.String())
			}
		}
		// A run directory gets its results rewritten, with the same verdict.
		if c.code == 255 {
			continue
		}
		var doc struct {
			Valid         any    `json:"valid"`
			UnknownReason string `json:"unknown_reason"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "results.json"))
		if err != nil || json.Unmarshal(b, &doc) != nil {
			t.Errorf("%s: results.json not written: %v", c.name, err)
			continue
		}
		if want := map[int]any{0: true, 1: false, 2: "unknown"}[c.code]; doc.Valid != want || (c.code == 2) != (doc.UnknownReason != "") {
			t.Errorf("%s: results.json says valid=%v (%q), want %v", c.name, doc.Valid, doc.UnknownReason, want)
		}
	}
}

func TestCheckRefusesBadArguments(t *testing.T) {
	t.Parallel()
	bin := build(t)
	for _, args := range [][]string{
		{"check", filepath.Join(t.TempDir(), "nothing-here")},
		{"check", "--timeout", "0s", t.TempDir()},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stderr = &stderr
		if code := exitCode(cmd.Run()); code != 255 || strings.Count(strings.TrimSpace(stderr.String()), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want 255 and one line", args, code, stderr.String())
		}
	}
}

// check of a run on a full disk: the verdict is printed and is the exit code; each file it could not
// write is a warning that names the fix.
func TestCheckOnAFullDiskKeepsTheVerdict(t *testing.T) {
	t.Parallel()
	bin := build(t)
	if os.Geteuid() != 0 {
		t.Skip("a full file system needs a tmpfs mount, and mounting needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	defer exec.Command("umount", "-l", dir).Run()
	hist := strings.Join([]string{
		`{"index":0,"time":0,"type":"invoke","process":-2,"f":"run","plan":{"lock":"single","workload":"mutex","keys":["k"],"clients":2,"ttl":1000000000,"time_limit":8000000000,"recovery":2000000000,"seed":1}}`,
		`{"index":1,"time":1000,"type":"invoke","process":0,"f":"acquire","key":"k"}`,
		`{"index":2,"time":2000,"type":"ok","process":0,"f":"acquire","key":"k","value":"a","deadline":900000000}`,
		`{"index":3,"time":3000,"type":"invoke","process":1,"f":"acquire","key":"k"}`,
		`{"index":4,"time":4000,"type":"ok","process":1,"f":"acquire","key":"k","value":"b","deadline":900000000}`,
		`{"index":5,"time":10000000000,"type":"ok","process":-2,"f":"run"}`,
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), []byte(hist), 0o644); err != nil {
		t.Fatal(err)
	}
	// Fill what is left of the file system.
	filler, _ := os.Create(filepath.Join(dir, "filler"))
	for {
		if _, err := filler.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	filler.Close()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "check", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if code := exitCode(cmd.Run()); code != 1 {
		t.Fatalf("exit %d, want the verdict's 1\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "verdict: INVALID: 1 pair of overlapping holds\nfirst finding:") {
		t.Errorf("stdout does not lead with the verdict:\n%s", stdout.String())
	}
	for _, want := range []string{"results.json", "summary.txt", "no space left on device", "free space where " + dir + " is", "the verdict above stands"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// check store/latest before any run says how to make one, not to check store/latest.
func TestCheckWithNoStoreSaysHowToMakeOne(t *testing.T) {
	t.Parallel()
	bin := build(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "check", "store/latest")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	line := strings.TrimSpace(string(out))
	if code := exitCode(err); code != 255 || strings.Contains(line, "\n") {
		t.Fatalf("exit %d, want 255 and one line:\n%s", code, out)
	}
	if !strings.Contains(line, "lockpick run --lock single") || strings.Contains(line, "for example store/latest") {
		t.Errorf("the error does not say how to make a run: %s", line)
	}
}
