package scenarios

import (
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/checker"
)

// Every built-in scenario parses, is a configuration the harness accepts, and expects a decided verdict.
func TestBuiltinScenariosResolve(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 5 {
		t.Fatalf("only %d scenarios", len(all))
	}
	for _, s := range all {
		cfg := s.Config
		if err := cfg.Resolve(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
		if s.Expect.Verdict == checker.Unknown {
			t.Errorf("%s expects unknown", s.Name)
		}
		if s.Why == "" {
			t.Errorf("%s says not why", s.Name)
		}
		if got, err := Find(s.Name); err != nil || got.Name != s.Name {
			t.Errorf("Find(%q) = %v, %v", s.Name, got.Name, err)
		}
	}
	if _, err := Find("nope"); err == nil || !strings.Contains(err.Error(), "redlock-restart") {
		t.Errorf("Find of an unknown scenario: %v, want the list of names", err)
	}
}

const good = `name: x
why: because
lock: redlock
clients: 4
ttl: 1s
time_limit: 10s
seed: 7
nemeses:
  - name: restart-delayed
    delay: 3s
  - restart-delayed
expect:
  verdict: valid
  some: [ok_in_faults]
  none: [overruns]
`

func TestParseReadsEveryField(t *testing.T) {
	_, err := Parse("x.yaml", []byte(good))
	if err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Fatalf("two restarts: %v", err)
	}
	s, err := Parse("x.yaml", []byte(strings.Replace(good, "  - restart-delayed\nexpect", "expect", 1)))
	if err != nil {
		t.Fatal(err)
	}
	c := s.Config
	if c.Lock != "redlock" || c.Clients != 4 || c.Seed != 7 || c.Keys != 1 || c.Nemesis != "restart-delayed:delay=3s" {
		t.Errorf("config %+v", c)
	}
	if s.Expect.Verdict != checker.Valid || s.Expect.Some[0] != "ok_in_faults" || s.Expect.None[0] != "overruns" {
		t.Errorf("expect %+v", s.Expect)
	}
}

// A client block gives --lock client its command and capabilities; the program is found on PATH.
func TestParseClientBlock(t *testing.T) {
	text := strings.Replace(strings.Replace(good, "  - restart-delayed\nexpect", "expect", 1), "lock: redlock", "lock: client\nclient:\n  command: [true, --flag]\n  capabilities: [validity, extend]", 1)
	text = strings.Replace(text, "nodes: 3\n", "", 1)
	s, err := Parse("x.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Config; c.Lock != "client" || len(c.ClientCmd) != 2 || c.ClientCmd[1] != "--flag" || strings.Join(c.ClientCaps, ",") != "validity,extend" {
		t.Fatalf("config %+v", c)
	}
}

// A bad file is refused with the file, the field and what is allowed.
func TestParseErrorsNameFileFieldAndFix(t *testing.T) {
	cases := []struct{ edit, old, want string }{
		{"lock: redlock", "lock: zookeeper", `x.yaml: lock: unknown lock "zookeeper": use one of`},
		{"ttl: 1s", "ttl: soon", `x.yaml: line 5: ttl: must be a duration`},
		{"clients: 4", "clients: four", `line 4: clients: must be a whole number`},
		{"seed: 7", "seed: 7\ncolour: red", `line 8: colour: unknown field: use one of name, why, lock`},
		{"    delay: 3s", "    delay: 3s\n    depth: 2", `nemeses: nemesis restart-delayed: unknown parameter "depth"`},
		{"  - name: restart-delayed", "  - name: meteor", `nemeses: line 9: unknown nemesis "meteor": use one of`},
		{"  verdict: valid", "  verdict: fine", `expect: verdict: verdict "fine": use valid or invalid`},
		{"  some: [ok_in_faults]", "  some: [luck]", `unknown finding "luck": use`},
		{"time_limit: 10s", "time_limit: 1s", `time_limit: 1s is not longer than ttl: 1s: give the run more than one TTL (for example time_limit: 30s)`},
		{"name: x\n", "", `field name is missing`},
		{"ttl: 1s\ntime_limit: 10s\n", "", `fields ttl (for example ttl: 2s), time_limit (for example time_limit: 30s) are missing: add them`},
		{"seed: 7", "seed: 7\nrecovry: 2s", `line 8: recovry: unknown field: did you mean recovery?`},
		{"seed: 7", "seed: -5", `line 7: seed: must be a whole number of at least 0, got "-5"`},
		{"seed: 7", "seed: 7\nrecovery: -1s", `recovery must not be negative`},
		{"seed: 7", "seed: 7\nguard: fencing", `guard fencing needs a resource: use workload counter`},
		{"clients: 4", "clients: 4\nnodes: 0", `line 5: nodes: must be at least 1, got 0`},
		{"clients: 4", "clients: 4\nnodes: 4", `use nodes 3 or 5`},
		{"clients: 4", "clients: 4\nclient_groups: 0", `client_groups: must be at least 1`},
		{"clients: 4", "clients: 4\ninterval: 0s", `interval: must be positive`},
		{"clients: 4", "clients: 1001", `clients must lie between 1 and 1000`},
		{"name: x", "name: y", `name "y" differs from the file name`},
		{"seed: 7", "seed: 7\nclient: ./c.py", `client: must be a mapping`},
		{"seed: 7", "seed: 7\nclient: {capabilities: [validity]}", `client: needs a command`},
		{"seed: 7", "seed: 7\nclient: {command: true, colour: red}", `colour: the client block has command`},
	}
	base := strings.Replace(good, "  - restart-delayed\nexpect", "expect", 1)
	for _, c := range cases {
		text := strings.Replace(base, c.edit, c.old, 1)
		if text == base {
			t.Fatalf("edit %q did not apply", c.edit)
		}
		_, err := Parse("x.yaml", []byte(text))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "x.yaml: ") {
			t.Errorf("%s: got %v, want %q", c.old, err, c.want)
		}
	}
}

func TestExpectationMet(t *testing.T) {
	e := Expectation{Verdict: checker.Valid, Some: []string{"ok_in_faults"}, None: []string{"overruns"}}
	r := &checker.Result{Valid: checker.Valid}
	r.Stats.OKInFaults = 3
	if miss := e.Met(r); len(miss) != 0 {
		t.Errorf("met run: %v", miss)
	}
	r.Stats.OKInFaults, r.OverrunCount, r.Valid = 0, 2, checker.Invalid
	if miss := e.Met(r); len(miss) != 3 {
		t.Errorf("missed run: %v", miss)
	}
}

// A file without a seed draws one at random and says so; a file with one keeps it.
func TestMissingSeedIsDrawnAndMarked(t *testing.T) {
	text := strings.Replace(strings.Replace(good, "  - restart-delayed\nexpect", "expect", 1), "seed: 7\n", "", 1)
	seeds := map[uint64]bool{}
	for range 3 {
		s, err := Parse("x.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if !s.RandomSeed {
			t.Fatal("a file without a seed is not marked RandomSeed")
		}
		seeds[s.Config.Seed] = true
	}
	if len(seeds) < 2 {
		t.Errorf("three parses drew the seeds %v: not random", seeds)
	}
	s, err := Parse("x.yaml", []byte(strings.Replace(good, "  - restart-delayed\nexpect", "expect", 1)))
	if err != nil || s.RandomSeed || s.Config.Seed != 7 {
		t.Errorf("a file with seed 7: seed %d, random %v, %v", s.Config.Seed, s.RandomSeed, err)
	}
}

// Even counts for Redlock are a choice the file states.
func TestAllowEvenNodes(t *testing.T) {
	text := strings.Replace(strings.Replace(good, "  - restart-delayed\nexpect", "expect", 1), "clients: 4", "clients: 4\nnodes: 4\nallow_even_nodes: true", 1)
	s, err := Parse("x.yaml", []byte(text))
	if err != nil || s.Config.Nodes != 4 || !s.Config.AllowEvenNodes {
		t.Fatalf("nodes %d, allow %v, %v", s.Config.Nodes, s.Config.AllowEvenNodes, err)
	}
}
