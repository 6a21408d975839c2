package systems

import (
	"context"
	"fmt"
	"strings"
)

// Topology is one server family: the nodes it runs and their first roles, the programs they need,
// its size rules and defaults, how its servers reach each other, and how it finds servers someone
// else runs. A family is one file with its Topology and one row in topologies; the backend it runs
// on (bed.go) is chosen apart from it, so no family is written out per backend.
type Topology interface {
	// Name is the system's name, as Names lists it.
	Name() string
	// Layout lists the nodes a system of cfg will have, with their first roles, after the
	// family's defaults and size rules (an error names a rule broken).
	Layout(cfg Config) ([]Node, error)
	// Programs resolves the programs the nodes run (absolute paths, the server first), which a
	// container image packs.
	Programs(cfg Config) ([]string, error)
	// Clocks says why the clock shim cannot move the nodes' clocks, or nil when it can.
	Clocks() error
	// Traits are what the family's servers allow faults to do, whatever runs them, and what a
	// configuration must know of the family.
	Traits() Traits
	// Size checks the size a run asks for and fills in the family's defaults; an error names the
	// option to change.
	Size(s *Size) error

	// persistence is how the nodes keep their data across restarts on a backend that runs them.
	persistence(cfg Config) Persistence
	// start declares the nodes of layout on b, starts them in the family's order and waits until
	// the system serves; on error it closes what it made, b's backend with it.
	start(ctx context.Context, b *bed, layout []Node) (System, error)
	// external connects to the family's servers that someone else runs (cfg.Endpoints).
	external(ctx context.Context, cfg Config) (System, error)
}

// topologies is the registry: every family Start knows, in the order Names lists them.
func topologies() []Topology {
	return []Topology{mastersTopology{}, sentinelTopology{}, etcdTopology{}, zkTopology{}, postgresTopology{}}
}

// Names lists the systems Start knows.
func Names() []string {
	var names []string
	for _, t := range topologies() {
		names = append(names, t.Name())
	}
	return names
}

// Lookup is the topology of the named system.
func Lookup(name string) (Topology, error) {
	for _, t := range topologies() {
		if t.Name() == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("unknown system %q: use one of %s", name, strings.Join(Names(), ", "))
}

// Validate checks a system name.
func Validate(name string) error {
	_, err := Lookup(name)
	return err
}

// Layout lists the nodes a system of cfg will have, with their first roles, without starting
// anything: what a configuration is checked against before a run.
func Layout(name string, cfg Config) ([]Node, error) {
	t, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	return t.Layout(cfg)
}

// Start starts the named system and waits until it serves. On error nothing is left running.
func Start(ctx context.Context, name string, cfg Config) (System, error) {
	t, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if err := CheckBackend(name, cfg.Backend); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = nopLogger()
	}
	if cfg.Backend == BackendExternal {
		return startExternal(ctx, t, cfg)
	}
	layout, err := t.Layout(cfg)
	if err != nil {
		return nil, err
	}
	b, err := openBed(ctx, t, cfg)
	if err != nil {
		return nil, err
	}
	return t.start(ctx, b, layout)
}
