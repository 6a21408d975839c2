// Package scenarios names runs whose outcome we know in advance: cells of the expected-outcome table
// in DESIGN.md. A scenario passes when the run's verdict is the one expected, so the suite shows both
// that safe configurations stay valid and that unsafe ones are caught.
package scenarios

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/harness"
)

// Scenario is a named run and the verdict it must reach.
type Scenario struct {
	Name string
	// Why says which cell of the table this is and why the verdict follows.
	Why    string
	Config harness.Config
	Expect checker.Verdict
}

func base(lock, nem string, limit time.Duration) harness.Config {
	return harness.Config{
		Lock: lock, Nemesis: nem, Clients: 10, Keys: 1,
		TTL: harness.Duration(2 * time.Second), TimeLimit: harness.Duration(limit),
		Recovery: harness.Duration(5 * time.Second), Interval: harness.Duration(5 * time.Second),
	}
}

// All lists the scenarios, in the order `lockpick scenario` runs them.
func All() []Scenario {
	return []Scenario{
		{
			Name:   "single-none",
			Why:    "single node, no faults: safe",
			Config: base("single", "none", 60*time.Second),
			Expect: checker.Valid,
		},
		{
			Name:   "single-restart",
			Why:    "single node restarted without persistence: the lock is forgotten while its holder works",
			Config: base("single", "restart", 30*time.Second),
			Expect: checker.Invalid,
		},
		{
			Name:   "redlock-none",
			Why:    "Redlock, 5 masters, no faults: safe",
			Config: base("redlock", "none", 60*time.Second),
			Expect: checker.Valid,
		},
		{
			Name:   "redlock-restart",
			Why:    "Redlock with a majority restarted at once without persistence: a second client gets a quorum of empty nodes",
			Config: base("redlock", "restart", 60*time.Second),
			Expect: checker.Invalid,
		},
		{
			Name:   "redlock-delayed-restart",
			Why:    "Redlock with every restarted node kept down 1.5 x TTL, as the spec recommends: safe, and granted while a majority is up",
			Config: base("redlock", "restart-delayed", 60*time.Second),
			Expect: checker.Valid,
		},
	}
}

// Find returns the scenario with the given name.
func Find(name string) (Scenario, error) {
	var names []string
	for _, s := range All() {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q: use one of %s (lockpick scenario --list)", name, strings.Join(names, ", "))
}
