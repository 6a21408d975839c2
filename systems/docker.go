package systems

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/lockpick-dev/lockpick/clusters"
	"github.com/lockpick-dev/lockpick/containers"
)

// Backends lists the backends a system can run on.
func Backends() []string { return []string{BackendLocal, BackendDocker, BackendExternal} }

// Backend names.
const (
	// BackendLocal runs nodes as child processes on loopback (the default).
	BackendLocal = "local"
	// BackendDocker runs nodes as containers on a private bridge network.
	BackendDocker = "docker"
	// BackendExternal uses servers someone else runs: lockpick only talks to them.
	BackendExternal = "external"
)

// DockerConfig is how a system runs on Docker.
type DockerConfig struct {
	// Engine is the Docker Engine the nodes run on; the caller opens and closes it.
	Engine *containers.Engine
	// Run labels the run's network and containers (the run's directory).
	Run string
}

// dockerNode is one node of the docker backend: a container whose working directory is the node's
// host directory, bind-mounted at the same path, so its data, log and clock file stay where the
// harness reads them.
type dockerNode struct {
	name string
	dir  string
	addr string
	// data are the files removed by a start without data.
	data    []string
	running bool
	// cut is the mode of the network cut in effect, or empty.
	cut string
	// op serialises what changes the container's state or its namespace's rules: a heal that
	// arrives while the node starts waits until the start's rules are in.
	op sync.Mutex
}

// docker runs nodes as containers of one session. Pausing is `docker pause` (the freezer cgroup
// stops every process of the node at once), killing `docker kill -s KILL`.
type docker struct {
	session *containers.Session
	shim    string
	persist clusters.Persistence
	log     *slog.Logger

	mu    sync.Mutex
	nodes map[string]*dockerNode
}

// newDocker creates the run's network; nodes are added with addRedis.
func newDocker(ctx context.Context, dc DockerConfig, shim string, persist clusters.Persistence, log *slog.Logger) (*docker, error) {
	if dc.Engine == nil {
		return nil, fmt.Errorf("the docker backend needs a Docker Engine connection")
	}
	if !dc.Engine.Local() {
		return nil, fmt.Errorf("the docker backend runs nodes on a local Engine only (unix socket), not %s: a node's data and clock live in the run's directory, shared with its container", dc.Engine.Host())
	}
	s, err := dc.Engine.NewSession(ctx, dc.Run)
	if err != nil {
		return nil, err
	}
	return &docker{session: s, shim: shim, persist: persist, log: log, nodes: map[string]*dockerNode{}}, nil
}

// redisPort is the port every redis node listens on inside its container.
const redisPort = 6379

// addRedis creates the container of a redis-server node (not started) from image, and returns its
// address.
func (b *docker) addRedis(ctx context.Context, name, dir, image, binary string) (*dockerNode, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	var env []string
	if b.shim != "" {
		if err := initClockFile(clockFile(dir)); err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		env = []string{"LD_PRELOAD=" + b.shim, clusters.ClockFileEnv + "=" + clockFile(dir)}
	}
	cmd := append([]string{binary}, clusters.RedisArgs("0.0.0.0", redisPort, dir, b.persist)...)
	ip, err := b.session.Create(ctx, name, containers.Spec{Image: image, Cmd: cmd, Env: env, Dir: dir})
	if err != nil {
		return nil, err
	}
	n := &dockerNode{name: name, dir: dir, addr: net.JoinHostPort(ip.String(), strconv.Itoa(redisPort)),
		data: []string{filepath.Join(dir, "dump.rdb"), filepath.Join(dir, "appendonlydir")}}
	b.mu.Lock()
	b.nodes[name] = n
	b.mu.Unlock()
	return n, nil
}

func (b *docker) node(name string) (*dockerNode, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.nodes[name]
	if !ok {
		return nil, fmt.Errorf("no node %q", name)
	}
	return n, nil
}

// Start implements Backend.
func (b *docker) Start(ctx context.Context, name string) error {
	return b.start(ctx, name, b.persist == clusters.PersistNone)
}

// StartEmpty implements Backend.
func (b *docker) StartEmpty(ctx context.Context, name string) error { return b.start(ctx, name, true) }

func (b *docker) start(ctx context.Context, name string, wipe bool) error {
	n, err := b.node(name)
	if err != nil {
		return err
	}
	b.mu.Lock()
	if n.running {
		b.mu.Unlock()
		return fmt.Errorf("node %s is already running", name)
	}
	n.running = true
	b.mu.Unlock()
	if wipe {
		for _, f := range n.data {
			os.RemoveAll(f)
		}
	}
	mark := logSize(n.dir)
	began := time.Now()
	if err := b.startContainer(ctx, n); err != nil {
		b.Kill(name)
		return err
	}
	if err := b.waitReady(ctx, n, mark); err != nil {
		b.Kill(name)
		return err
	}
	b.log.Debug("container started", "node", name, "addr", n.addr, "took", time.Since(began))
	return nil
}

// startContainer starts the node's container and, when the node is cut, cuts the container's new
// namespace before anyone can reach the node.
func (b *docker) startContainer(ctx context.Context, n *dockerNode) error {
	n.op.Lock()
	defer n.op.Unlock()
	if err := b.session.Start(ctx, n.name); err != nil {
		return err
	}
	b.mu.Lock()
	cut := n.cut
	b.mu.Unlock()
	if cut == "" {
		return nil
	}
	return b.iptables(ctx, n, "-A", cut)
}

func (b *docker) setRunning(n *dockerNode, running bool) {
	b.mu.Lock()
	n.running = running
	b.mu.Unlock()
}

// waitReady waits until the node answers PING or, as a node cut off the network cannot be asked,
// its log past mark (its size before the start) says it is ready. A container is slower to come up
// than a process.
func (b *docker) waitReady(ctx context.Context, n *dockerNode, mark int64) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := clusters.PingOnce(ctx, n.addr)
		if err == nil || loggedReady(n.dir, mark) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s (container at %s) did not answer within 20s: %v; its output: %s", n.name, n.addr, err, lastLines(n.dir))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: %w", n.name, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Kill implements Backend.
func (b *docker) Kill(name string) error {
	n, err := b.node(name)
	if err != nil {
		return err
	}
	b.mu.Lock()
	running := n.running
	n.running = false
	b.mu.Unlock()
	if !running {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n.op.Lock()
	defer n.op.Unlock()
	if err := b.session.Kill(ctx, name); err != nil {
		return err
	}
	b.log.Debug("container killed", "node", name)
	return nil
}

// Running implements Backend.
func (b *docker) Running(name string) bool {
	n, err := b.node(name)
	if err != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return n.running
}

// Signal implements Backend: SIGSTOP and SIGCONT pause and continue the container.
func (b *docker) Signal(name string, sig syscall.Signal) error {
	if !b.Running(name) {
		return fmt.Errorf("node %s is not running", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return b.session.Signal(ctx, name, sig)
}

// ClockShim implements Backend.
func (b *docker) ClockShim() bool { return b.shim != "" }

// SetClockOffset implements Backend: the container's shim maps the same file, through the bind
// mount, so a write here moves the node's clock at its next read.
func (b *docker) SetClockOffset(name string, offset time.Duration) error {
	n, err := b.node(name)
	if err != nil {
		return err
	}
	if b.shim == "" {
		return fmt.Errorf("node %s runs without the clock shim: its clock cannot be moved", name)
	}
	if err := clusters.WriteClockOffset(clockFile(n.dir), offset); err != nil {
		return fmt.Errorf("set clock of %s: %w", name, err)
	}
	return nil
}

// ClockOffset implements Backend.
func (b *docker) ClockOffset(name string) (time.Duration, error) {
	n, err := b.node(name)
	if err != nil {
		return 0, err
	}
	off, err := clusters.MeasureClockOffset(n.addr)
	if err != nil {
		return 0, fmt.Errorf("measure clock of %s: %w", name, err)
	}
	return off, nil
}

// Close removes every container and the network.
func (b *docker) Close() error { return b.session.Close() }

// CheckBackend checks that the named system runs on backend.
func CheckBackend(system, backend string) error {
	switch backend {
	case "", BackendLocal:
		return nil
	case BackendDocker:
		if system != "redis-masters" {
			return fmt.Errorf("--backend docker runs redis-masters (--lock single, redlock, fenced, ...) so far, not %s: use --backend local", system)
		}
		return nil
	case BackendExternal:
		return nil
	}
	return fmt.Errorf("unknown backend %q: use one of %v", backend, Backends())
}

// startDocker starts the named system on the docker backend.
func startDocker(ctx context.Context, name string, cfg Config) (System, error) {
	if err := CheckBackend(name, BackendDocker); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("system %s: %w", name, err)
	}
	if cfg.Nodes < 1 {
		return nil, fmt.Errorf("system redis-masters needs at least one node, got %d", cfg.Nodes)
	}
	return startMastersDocker(ctx, cfg, dir)
}
