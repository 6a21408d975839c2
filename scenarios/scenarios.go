// Package scenarios reads scenario files: runs whose outcome we know in advance, the cells of the
// expected-outcome table in docs/expected-outcomes.md. A scenario passes when the run shows what it expects, so the
// suite shows both that safe configurations stay valid and that unsafe ones are caught.
//
// The repository's scenarios/*.yaml are built into the binary, so `lockpick scenario NAME` works
// from any directory; `lockpick run FILE.yaml` reads any file from disk.
package scenarios

import (
	"embed"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/lockpick-dev/lockpick/harness"
)

//go:embed *.yaml
var files embed.FS

// Scenario is a named run and what it must show.
type Scenario struct {
	Name string
	// Why says which cell of the table this is and why the outcome follows.
	Why string
	// File is where the scenario was read from.
	File   string
	Config harness.Config
	Expect Expectation
	// RandomSeed is true when the file gives no seed: Config.Seed was drawn at random, to be printed.
	RandomSeed bool
}

// All reads the built-in scenarios, sorted by name.
func All() ([]Scenario, error) {
	entries, err := files.ReadDir(".")
	if err != nil {
		return nil, err
	}
	var out []Scenario
	seen := map[string]string{}
	for _, e := range entries {
		data, err := files.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		s, err := Parse(path.Join("scenarios", e.Name()), data)
		if err != nil {
			return nil, err
		}
		if want := strings.TrimSuffix(e.Name(), ".yaml"); s.Name != want {
			return nil, fmt.Errorf("%s: name %q differs from the file name: name it %s", s.File, s.Name, want)
		}
		if prev, dup := seen[s.Name]; dup {
			return nil, fmt.Errorf("scenario %s defined in %s and %s", s.Name, prev, s.File)
		}
		seen[s.Name] = s.File
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Find returns the built-in scenario with the given name; a name ending in .yaml is read from disk.
func Find(name string) (Scenario, error) {
	if strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") {
		return Load(name)
	}
	// A built-in scenario is named after its file: read that one file, not every file (callers look
	// scenarios up one by one, a card's rows or a test's whole list).
	if data, err := files.ReadFile(name + ".yaml"); err == nil {
		s, err := Parse(path.Join("scenarios", name+".yaml"), data)
		if err != nil {
			return Scenario{}, err
		}
		if s.Name != name {
			return Scenario{}, fmt.Errorf("%s: name %q differs from the file name: name it %s", s.File, s.Name, name)
		}
		return s, nil
	}
	all, err := All()
	if err != nil {
		return Scenario{}, err
	}
	var names []string
	for _, s := range all {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q: use one of %s (lockpick scenario --list), or give a .yaml file", name, strings.Join(names, ", "))
}
