package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/harness"
)

// failure runs lockpick in process and returns its error, which must be one line.
func failure(t *testing.T, args ...string) string {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := unknownCommand(root, args)
	if err == nil {
		err = root.Execute()
	}
	if err == nil {
		t.Fatalf("lockpick %s: no error\n%s", strings.Join(args, " "), out.String())
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("lockpick %s: not one line: %q", strings.Join(args, " "), err)
	}
	return err.Error()
}

// --help is made from the table: every option a command takes is listed with its help.
func TestHelpListsEveryOption(t *testing.T) {
	for _, command := range []string{"run", "card", "matrix", "scenario"} {
		help := execute(t, command, "--help")
		for _, o := range harness.Options() {
			if !o.TakenBy(command) && (command != "scenario" || !o.WithFile) {
				continue
			}
			first, _, _ := strings.Cut(o.Help, " (")
			if !strings.Contains(help, "--"+o.Name+" ") || !strings.Contains(help, first) {
				t.Errorf("lockpick %s --help does not list --%s (%s)", command, o.Name, first)
			}
		}
	}
}

// A flag that does not parse, or that the command does not take, is refused in one line that says
// what is wanted: no strconv error, the nearest flag, the command that takes it, the file's field.
func TestFlagErrorsSayWhatIsWanted(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--seed", "-5"}, "--seed -5: must be a whole number of at least 0 (for example --seed 3)"},
		{[]string{"run", "--clients", "ten"}, "--clients ten: must be a whole number (for example --clients 10)"},
		{[]string{"matrix", "--parallel", "x"}, "--parallel x: must be a whole number"},
		{[]string{"run", "--ttl"}, "--ttl needs a value (for example --ttl 2s)"},
		{[]string{"run", "--sed", "3"}, "unknown flag --sed: did you mean --seed?"},
		{[]string{"card", "redlock", "--nodez", "3"}, "did you mean --nodes?"},
		{[]string{"matrix", "--reentrant"}, "--reentrant is not a flag of matrix: it applies to lockpick run"},
		{[]string{"scenario", "x.yaml", "--recovery", "20s"}, "--recovery is set in the scenario file, not on the command line: set recovery: in the file"},
		{[]string{"run", "x.yaml", "--recovery", "20s", "--nemesis", "restart"}, "set nemeses: [restart], recovery: 20s in x.yaml instead"},
		{[]string{"run", "x.yaml", "--name", "n"}, "drop --name (a scenario's name is its own name: field)"},
		{[]string{"run", "--nodes", "0"}, "--nodes 0: give a positive value, or leave --nodes out for its default"},
		{[]string{"rnu"}, `unknown command "rnu": did you mean lockpick run?`},
		{[]string{"scenaro"}, `did you mean lockpick scenario?`},
		{[]string{"matrix", "--seeds", "1,x"}, `"x" is not a seed`},
		{[]string{"matrix", "--seeds", "1,2,3", "--nemeses", "clock:target=nowhere"}, "--nemesis: "},
		{[]string{"matrix", "--first-seed", "4"}, "use --seeds 4-6"},
	}
	for _, c := range cases {
		if got := failure(t, c.args...); !strings.Contains(got, c.want) || strings.Contains(got, "strconv") {
			t.Errorf("%v: %q, want %q", c.args, got, c.want)
		}
	}
}

// --seeds means one thing in run, card and matrix: seeds and ranges of seeds.
func TestSeedsIsAListEverywhere(t *testing.T) {
	got, err := parseSeeds("1-3,7")
	if err != nil || !slices.Equal(got, []uint64{1, 2, 3, 7}) {
		t.Errorf("1-3,7: %v, %v", got, err)
	}
	for _, bad := range []string{"3-1", "1-", "-5", "1,2-3,3"} {
		if _, err := parseSeeds(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	for _, command := range []string{"run", "card", "matrix"} {
		if !strings.Contains(execute(t, command, "--help"), "seeds separated by commas, and ranges") {
			t.Errorf("%s --seeds is not the list", command)
		}
	}
}

// card LOCK <TAB> completes locks, and nothing after the lock: never file names.
func TestCardCompletesLocks(t *testing.T) {
	got, d := complete(t, "card", "red")
	if !slices.Contains(got, "redlock") || !slices.Contains(got, "redsync") || d&cobra.ShellCompDirectiveNoFileComp == 0 {
		t.Errorf("card red<TAB>: %v, directive %d", got, d)
	}
	got, d = complete(t, "card", "redlock", "")
	if len(got) != 0 || d&cobra.ShellCompDirectiveNoFileComp == 0 {
		t.Errorf("card redlock <TAB>: %v, directive %d", got, d)
	}
}

// `lockpick help options` lists every option with its field or why a file has none.
func TestOptionsTopicListsEveryOption(t *testing.T) {
	for _, args := range [][]string{{"help", "options"}, {"completion", "bash"}, {"__complete", "run", "--lo"}} {
		if err := unknownCommand(newRoot(), args); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	doc := execute(t, "help", "options")
	for _, o := range harness.Options() {
		row := "| `--" + o.Name + "` | "
		if o.Key != "" {
			row += "`" + o.Key + ":`"
		} else {
			row += "none: " + o.NoKey
		}
		if !strings.Contains(doc, row) {
			t.Errorf("help options lacks %q", row)
		}
	}
}

// The README's table of run flags names only flags run has, with the table's defaults where it
// quotes one (a flag whose default Resolve decides, such as --guard's, has none to compare).
func TestReadmeFlagTableIsTrue(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	run := newRunCmd()
	rows := 0
	for _, line := range strings.Split(string(data), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`--") {
			continue
		}
		rows++
		name := strings.Trim(strings.TrimSpace(cells[1]), "`-")
		fl := run.Flags().Lookup(name)
		if fl == nil {
			t.Errorf("README's flag table has --%s, which run does not take", name)
			continue
		}
		def := strings.TrimSpace(cells[2])
		if strings.HasPrefix(def, "`") && fl.DefValue != "" && strings.Trim(def, "`") != fl.DefValue {
			t.Errorf("README gives --%s the default %s, run's is %q", name, def, fl.DefValue)
		}
	}
	if rows < 10 {
		t.Fatalf("found %d rows of the README's flag table: has it moved?", rows)
	}
}
