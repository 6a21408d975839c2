package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// execute runs lockpick in-process with args and returns what it printed.
func execute(t *testing.T, args ...string) string {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		t.Fatalf("lockpick %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// Both forms print the module version, the revision the Makefile stamps, and the Go version.
func TestVersion(t *testing.T) {
	defer func(r string) { revision = r }(revision)
	revision = "0123456789abcdef-dirty"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out := execute(t, args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "lockpick ") || len(lines[0]) <= len("lockpick ") {
			t.Fatalf("%v printed %q, want three lines starting with the module version", args, out)
		}
		if lines[1] != "revision "+revision {
			t.Errorf("%v: revision line %q, want the -ldflags revision %q", args, lines[1], revision)
		}
		if !strings.HasPrefix(lines[2], runtime.Version()+" ") {
			t.Errorf("%v: Go line %q, want %s", args, lines[2], runtime.Version())
		}
	}
}

// Without -ldflags, the revision comes from the build's VCS stamp, or says how to get one.
func TestVersionWithoutLdflags(t *testing.T) {
	defer func(r string) { revision = r }(revision)
	revision = "unknown"
	out := execute(t, "version")
	if strings.Contains(out, "revision unknown\n") || !strings.Contains(out, "revision ") {
		t.Fatalf("version printed %q: want a VCS revision or how to build with one", out)
	}
}
