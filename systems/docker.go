package systems

import (
	"context"
	"errors"
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
	// PublishHost is where this host reaches the ports a remote Engine publishes; empty: the
	// Engine's own host.
	PublishHost string
}

// dockerNode is one node of the docker backend: a server process run (docker exec) in a container
// that lives for the whole run, so the node keeps its network namespace, its address and any cut
// across restarts. Its working directory is the node's host directory, bind-mounted at the same
// path, so its data, log and clock file stay where the harness reads them.
type dockerNode struct {
	name string
	dir  string
	addr string
	// cmd and env start the server.
	cmd, env []string
	// data are the files removed by a start without data.
	data []string
	// peer says how other servers reach the node (dockerpeers.go); ready, when set, replaces the
	// redis readiness check; wipedCmd, when set, replaces cmd on a start without data after the
	// first start (an etcd member that lost its data joins as an existing member).
	peer     dockerPeer
	ready    func(ctx context.Context) error
	wipedCmd []string
	// readyLog, when set, is what the node logs once it serves, which its start takes instead of
	// ready while the node is cut from the harness (dockerpeers.go).
	readyLog logLine
	started  bool
	running  bool
	proc     containers.Proc
	paused   bool
	// cut is the mode of the network cut in effect, or empty.
	cut string
	// op serialises what changes the container's state or its namespace's rules: a heal that
	// arrives while the node starts waits until the start's rules are in.
	op sync.Mutex
}

// docker runs nodes in containers of one session. A container's own process is an idle
// redis-server listening on a unix socket only (its init, so to speak); the node is a second
// redis-server started in it by docker exec and killed with SIGKILL from the host. Pausing is
// `docker pause` (the freezer cgroup stops every process of the node at once).
type docker struct {
	session *containers.Session
	shim    string
	persist clusters.Persistence
	log     *slog.Logger

	mu    sync.Mutex
	nodes map[string]*dockerNode

	// queues number the paths slowed in the run (under a lock of their own).
	queues queueNums
}

// newDocker creates the run's network; nodes are added with addRedis.
func newDocker(ctx context.Context, dc DockerConfig, shim string, persist clusters.Persistence, log *slog.Logger) (*docker, error) {
	if dc.Engine == nil {
		return nil, fmt.Errorf("the docker backend needs a Docker Engine connection")
	}
	if !dc.Engine.Local() {
		return nil, fmt.Errorf("the Engine at %s is remote: its nodes run in pods (dockerremote.go)", dc.Engine.Host())
	}
	s, err := dc.Engine.NewSession(ctx, dc.Run)
	if err != nil {
		return nil, err
	}
	return &docker{session: s, shim: shim, persist: persist, log: log, nodes: map[string]*dockerNode{}}, nil
}

// redisPort is the port every redis node listens on inside its container.
const redisPort = 6379

// addRedis creates the container of a redis-server node (not started) from image.
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
	// The container's own process: a redis-server that stores nothing and listens on no TCP port.
	idle := []string{binary, "--port", "0", "--unixsocket", "/tmp/idle.sock", "--save", "", "--appendonly", "no", "--dir", "/tmp"}
	ip, err := b.session.Create(ctx, name, containers.Spec{Image: image, Cmd: idle, Dir: dir})
	if err != nil {
		return nil, err
	}
	n := &dockerNode{name: name, dir: dir, addr: net.JoinHostPort(ip.String(), strconv.Itoa(redisPort)),
		cmd: append([]string{binary}, clusters.RedisArgs("0.0.0.0", redisPort, dir, b.persist)...), env: env,
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
	mark := n.logSize()
	began := time.Now()
	n.op.Lock()
	cmd := n.cmd
	if wipe && n.started && n.wipedCmd != nil {
		cmd = n.wipedCmd
	}
	n.started = true
	proc, err := b.session.Exec(ctx, name, cmd, n.env, n.dir)
	b.mu.Lock()
	n.proc = proc
	b.mu.Unlock()
	n.op.Unlock()
	if err != nil {
		b.setRunning(n, false)
		return err
	}
	if err := b.waitReady(ctx, n, mark); err != nil {
		b.Kill(name)
		return err
	}
	b.log.Debug("node started", "node", name, "addr", n.addr, "pid", proc.Pid, "took", time.Since(began))
	return nil
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
		err := b.isReady(ctx, n, mark)
		if err == nil {
			return nil
		}
		b.mu.Lock()
		proc := n.proc
		b.mu.Unlock()
		if !proc.Alive() {
			return fmt.Errorf("node %s exited during start-up: %s", n.name, lastLines(n.dir))
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

// Kill implements Backend: SIGKILL from the host, at once; a paused node is thawed after the signal
// (the freezer holds even a SIGKILL back), so it dies without running another instruction.
func (b *docker) Kill(name string) error {
	n, err := b.node(name)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	b.mu.Lock()
	running, paused, proc := n.running, n.paused, n.proc
	n.running, n.paused = false, false
	b.mu.Unlock()
	if !running {
		return nil
	}
	if err := proc.Kill(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill node %s: %w", name, err)
	}
	if paused {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.session.Unpause(ctx, name); err != nil {
			return fmt.Errorf("kill node %s: %w", name, err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); proc.Alive(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s (pid %d) still runs 10s after SIGKILL", name, proc.Pid)
		}
	}
	b.log.Debug("node killed", "node", name, "pid", proc.Pid)
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

// Signal implements Backend: SIGSTOP and SIGCONT pause and continue the container; any other
// signal goes to the node's process.
func (b *docker) Signal(name string, sig syscall.Signal) error {
	n, err := b.node(name)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	b.mu.Lock()
	running, proc := n.running, n.proc
	b.mu.Unlock()
	if !running {
		return fmt.Errorf("node %s is not running", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch sig {
	case syscall.SIGSTOP:
		err = b.session.Pause(ctx, name)
	case syscall.SIGCONT:
		err = b.session.Unpause(ctx, name)
	default:
		return proc.Kill(sig)
	}
	if err == nil {
		b.mu.Lock()
		n.paused = sig == syscall.SIGSTOP
		b.mu.Unlock()
	}
	return err
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

// Close stops the readers of the paths still slowed, then removes every container and the network.
func (b *docker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return errors.Join(b.unslowAll(ctx), b.session.Close())
}

// CheckBackend checks that the named system runs on backend.
func CheckBackend(system, backend string) error {
	switch backend {
	case "", BackendLocal:
		return nil
	case BackendDocker:
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
	switch name {
	case "redis-sentinel":
		if !cfg.Docker.Engine.Local() {
			return startSentinelRemote(ctx, cfg, dir)
		}
		return startSentinelDocker(ctx, cfg, dir)
	case "etcd":
		if !cfg.Docker.Engine.Local() {
			return startEtcdRemote(ctx, cfg, dir)
		}
		return startEtcdDocker(ctx, cfg, dir)
	}
	if cfg.Nodes < 1 {
		return nil, fmt.Errorf("system redis-masters needs at least one node, got %d", cfg.Nodes)
	}
	return startMastersDocker(ctx, cfg, dir)
}

// up starts the node's container, then the node in it.
func (b *docker) up(ctx context.Context, name string) error {
	if err := b.session.Start(ctx, name); err != nil {
		return err
	}
	return b.Start(ctx, name)
}
