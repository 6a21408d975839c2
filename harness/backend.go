package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/lockpick-dev/lockpick/containers"
	"github.com/lockpick-dev/lockpick/nemesis"
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
	if c.Backend == systems.BackendDocker && !containers.IsLocalHost(c.DockerHost) {
		if err := systems.CheckRemote(c.System); err != nil {
			return fmt.Errorf("--backend: %w", err)
		}
	}
	// Faults are checked against what the system on this backend can do, before anything starts.
	c.offer = nemesis.Offered(c.System, c.Backend, c.DockerHost, systems.Persistence(c.Persistence))
	if err := c.offer.Check(c.faults); err != nil {
		return err
	}
	if err := c.resolveSSH(); err != nil {
		return err
	}
	if c.Backend == systems.BackendExternal {
		return c.resolveExternal()
	}
	if len(c.Endpoints) > 0 {
		return fmt.Errorf("--endpoints name servers for --backend external, and the backend is %s (lockpick starts the nodes): drop --endpoints or add --backend external", c.Backend)
	}
	if c.KeyPrefix != "" {
		return fmt.Errorf("a key prefix is set for --backend external only")
	}
	if c.MasterName != "" {
		return fmt.Errorf("--master-name names the primary of external sentinels: add --backend external (lockpick's own sentinels monitor %q)", systems.MasterName)
	}
	if c.DockerPublishHost != "" && (c.Backend != systems.BackendDocker || containers.IsLocalHost(c.DockerHost)) {
		return fmt.Errorf("--docker-publish-host says where a remote Engine's published ports are reached, and this run has no remote Engine: drop it, or add --backend docker --docker-host tcp://HOST:PORT")
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

// resolveExternal checks a run against servers someone else runs: the endpoints make the nodes,
// only client-side faults apply (resolveBackend checked them against the offer), nothing that
// configures a server may be given, and the keys get a prefix of their own so that the run deletes
// only what it wrote.
func (c *Config) resolveExternal() error {
	if err := systems.CheckEndpoints(c.Endpoints); err != nil {
		return err
	}
	if c.DockerHost != "" {
		return fmt.Errorf("--docker-host chooses the Engine of --backend docker: drop it")
	}
	if c.Persistence != "" && c.Persistence != "none" {
		return fmt.Errorf("--persistence configures the nodes lockpick starts, and --backend external servers keep theirs: drop --persistence")
	}
	if c.EtcdServer != "" {
		return fmt.Errorf("--etcd-server chooses the etcd lockpick starts; with --backend external the members are --endpoints: drop it")
	}
	if c.BasePort != 0 || c.RedisServer != "" {
		return fmt.Errorf("--base-port and --redis-server choose the nodes lockpick starts; with --backend external the servers are --endpoints: drop them")
	}
	if c.traits().Discovers {
		if c.MasterName == "" {
			return fmt.Errorf("--lock %s on --backend external: the --endpoints are sentinels; add --master-name, the name they monitor the primary under", c.Lock)
		}
	} else if c.MasterName != "" {
		return fmt.Errorf("--master-name names the primary external sentinels monitor, and --lock %s uses no sentinel: drop it", c.Lock)
	} else if c.Nodes != len(c.Endpoints) {
		return fmt.Errorf("--nodes %d and %d --endpoints: with --backend external every endpoint is a node: drop --nodes", c.Nodes, len(c.Endpoints))
	}
	if c.KeyPrefix == "" {
		// Unique per run: time and a random part, so two runs never share a key.
		c.KeyPrefix = "lockpick-" + strconv.FormatInt(time.Now().UnixMilli(), 36) + "-" + strconv.FormatUint(rand.Uint64()>>40, 36) + ":"
	}
	return nil
}
