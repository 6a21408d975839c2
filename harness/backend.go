package harness

import (
	"context"
	"fmt"

	"github.com/lockpick-dev/lockpick/containers"
	"github.com/lockpick-dev/lockpick/systems"
)

// resolveBackend checks the backend against the system: a backend that cannot run the system is
// refused before anything starts.
func (c *Config) resolveBackend() error {
	if c.Backend == "" {
		c.Backend = systems.BackendLocal
	}
	if err := systems.CheckBackend(c.System, c.Backend); err != nil {
		return fmt.Errorf("--backend: %w", err)
	}
	for _, s := range c.Specs() {
		if s.Name == "netcut" && c.Backend == systems.BackendDocker {
			if err := systems.NetToolsMissing(); err != nil {
				return fmt.Errorf("--nemesis: %w", err)
			}
		}
	}
	if c.DockerHost != "" && c.Backend != systems.BackendDocker {
		return fmt.Errorf("--docker-host chooses the Engine of --backend docker, and the backend is %s: drop --docker-host or add --backend docker", c.Backend)
	}
	return nil
}

// openBackend connects to the Docker Engine of a docker run and removes what runs killed earlier
// left there, which it returns as a note; a local run needs nothing and gets a nil engine.
func openBackend(ctx context.Context, cfg Config) (*containers.Engine, string, error) {
	if cfg.Backend != systems.BackendDocker {
		return nil, "", nil
	}
	eng, err := containers.Connect(ctx, cfg.DockerHost)
	if err != nil {
		return nil, "", err
	}
	removed, err := eng.Clean(ctx, containers.CleanOptions{})
	if err != nil {
		eng.Close()
		return nil, "", fmt.Errorf("remove what earlier runs left on the Docker Engine: %w", err)
	}
	note := ""
	if !removed.Empty() {
		note = "removed what killed runs left on the Docker Engine: " + removed.String()
	}
	return eng, note, nil
}
