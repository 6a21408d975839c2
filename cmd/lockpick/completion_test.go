package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// complete asks cobra's hidden __complete command, as the shell scripts do, and returns the
// candidates and the directive.
func complete(t *testing.T, args ...string) ([]string, cobra.ShellCompDirective) {
	t.Helper()
	out := execute(t, append([]string{cobra.ShellCompRequestCmd}, args...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var got []string
	var directive cobra.ShellCompDirective = -1
	for _, l := range lines {
		if d, ok := strings.CutPrefix(l, ":"); ok {
			n, err := strconv.Atoi(d)
			if err != nil {
				t.Fatalf("directive line %q", l)
			}
			directive = cobra.ShellCompDirective(n)
			continue
		}
		if l != "" && !strings.HasPrefix(l, "Completion ended") {
			got = append(got, strings.SplitN(l, "\t", 2)[0])
		}
	}
	if directive < 0 {
		t.Fatalf("no directive in %q", out)
	}
	return got, directive
}

func TestCompletionValues(t *testing.T) {
	cases := []struct {
		args []string
		want []string // all of these, and nothing that does not start with the word
	}{
		{[]string{"run", "--lock", ""}, []string{"fenced", "redlock", "single"}},
		{[]string{"matrix", "--locks", "single,r"}, []string{"single,redlock"}},
		{[]string{"run", "--nemesis", "re"}, []string{"restart", "restart-delayed"}},
		{[]string{"run", "--nemesis", "restart:"}, []string{"restart:target=", "restart:interval=", "restart:wait="}},
		{[]string{"run", "--nemesis", "restart-delayed:"}, []string{"restart-delayed:delay="}},
		{[]string{"run", "--nemesis", "restart:target=holder"}, []string{"restart:target=holder", "restart:target=holder-one", "restart:target=holder-majority"}},
		{[]string{"run", "--nemesis", "clock:target="}, []string{"clock:target=majority", "clock:target=holder-one"}},
		{[]string{"run", "--nemesis", "clock:jump=forward+"}, []string{"clock:jump=forward+back", "clock:jump=forward+strobe"}},
		{[]string{"run", "--nemesis", "partition:mode=reset:"}, []string{"partition:mode=reset:kind=", "partition:mode=reset:duration="}},
		{[]string{"matrix", "--nemeses", "none,pa"}, []string{"none,partition", "none,pause"}},
		{[]string{"run", "--workload", ""}, []string{"mutex", "counter"}},
		{[]string{"run", "--guard", ""}, []string{"none", "fencing", "check-and-set"}},
		{[]string{"run", "--persistence", ""}, []string{"none", "aof-everysec", "aof-always"}},
		{[]string{"matrix", "--persistence", "aof-a"}, []string{"aof-always"}},
		{[]string{"scenario", "redlock-re"}, []string{"redlock-restart", "redlock-restart-aof-always"}},
		{[]string{"scenario", "redlock-restart", "single-n"}, []string{"single-none"}},
	}
	for _, c := range cases {
		got, d := complete(t, c.args...)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: got %q, want it to include %q", c.args, got, w)
			}
		}
		word := c.args[len(c.args)-1]
		for _, g := range got {
			if !strings.HasPrefix(g, word) {
				t.Errorf("%q: candidate %q does not continue %q", c.args, g, word)
			}
		}
		if d&cobra.ShellCompDirectiveNoFileComp == 0 {
			t.Errorf("%q: directive %d offers file names for a value", c.args, d)
		}
	}
}

// A parameter already given is not offered again; values of unknown nemeses are not guessed.
func TestCompletionNemesisParameters(t *testing.T) {
	got, _ := complete(t, "run", "--nemesis", "restart:target=one:")
	if slices.Contains(got, "restart:target=one:target=") || !slices.Contains(got, "restart:target=one:interval=") {
		t.Errorf("got %q: want interval= and not target= again", got)
	}
	if got, d := complete(t, "run", "--nemesis", "meteor:"); len(got) != 0 || d != cobra.ShellCompDirectiveError {
		t.Errorf("unknown nemesis: got %q, directive %d; want nothing and an error directive", got, d)
	}
}

// run completes scenario files; scenario's names are not offered twice; check completes directories.
func TestCompletionArguments(t *testing.T) {
	// The test runs in cmd/lockpick, where there is no scenarios directory: any YAML file.
	if got, d := complete(t, "run", ""); d != cobra.ShellCompDirectiveFilterFileExt || !slices.Contains(got, "yaml") {
		t.Errorf("run: got %q directive %d, want YAML files", got, d)
	}
	t.Chdir("../..")
	got, _ := complete(t, "run", "scenarios/redlock-re")
	if !slices.Contains(got, "scenarios/redlock-restart.yaml") {
		t.Errorf("run in a checkout: got %q, want scenarios/redlock-restart.yaml", got)
	}
	if got, _ := complete(t, "scenario", "single-none", "single-n"); slices.Contains(got, "single-none") {
		t.Errorf("scenario offered single-none twice: %q", got)
	}
	if _, d := complete(t, "check", ""); d != cobra.ShellCompDirectiveFilterDirs {
		t.Errorf("check: directive %d, want directories", d)
	}
}

// The completion command itself writes a script for each shell.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out := execute(t, "completion", shell); !strings.Contains(out, "lockpick") || len(out) < 1000 {
			t.Errorf("completion %s: %d bytes", shell, len(out))
		}
	}
}
