package scenarios

import (
	"testing"

	"github.com/lockpick-dev/lockpick/checker"
)

// Every scenario is a configuration the harness accepts, with a decided expectation.
func TestScenariosResolve(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range All() {
		if seen[s.Name] {
			t.Errorf("scenario %s defined twice", s.Name)
		}
		seen[s.Name] = true
		cfg := s.Config
		if err := cfg.Resolve(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
		if s.Expect == checker.Unknown {
			t.Errorf("%s expects unknown: a scenario must expect valid or invalid", s.Name)
		}
		if got, err := Find(s.Name); err != nil || got.Name != s.Name {
			t.Errorf("Find(%q) = %v, %v", s.Name, got.Name, err)
		}
	}
	if _, err := Find("nope"); err == nil {
		t.Error("Find accepted an unknown scenario")
	}
}
