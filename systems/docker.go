package systems

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockpick-dev/lockpick/containers"
)

// Backends lists the backends a system can run on.
func Backends() []string { return []string{BackendLocal, BackendDocker, BackendSSH, BackendExternal} }

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

// docker runs nodes in containers of one session, on the node table. A container lives for the
// whole run, so the node keeps its network namespace, its address and any cut across restarts; its
// own process is idle (a redis-server on a unix socket only, or sleep), and the node is a server
// started in it by docker exec and killed with SIGKILL from the host. Its working directory is the
// node's host directory, bind-mounted at the same path, so its data, log and clock file stay where
// the harness reads them. Pausing is `docker pause` (the freezer cgroup stops every process of the
// node at once).
type docker struct {
	*table
	session *containers.Session
	shim    string
	log     *slog.Logger

	// queues number the paths slowed in the run (under a lock of their own).
	queues queueNums
}

// newDocker creates the run's network; nodes are added with add.
func newDocker(ctx context.Context, dc DockerConfig, shim string, persist Persistence, log *slog.Logger) (*docker, error) {
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
	d := &docker{session: s, shim: shim, log: log}
	d.table = newTable(d, shim, persist, log)
	return d, nil
}

// redisPort is the port every redis node listens on inside its container.
const redisPort = 6379

// newHost implements runner: the node's container (not started), whose address is the node's.
func (b *docker) newHost(ctx context.Context, sp nodeSpec) (host, place, error) {
	if err := os.MkdirAll(sp.dir, 0o755); err != nil {
		return nil, place{}, fmt.Errorf("node %s: %w", sp.name, err)
	}
	h := &dockerHost{session: b.session, sp: sp}
	if sp.shim && b.shim != "" {
		if err := InitClockFile(ClockFile(sp.dir)); err != nil {
			return nil, place{}, fmt.Errorf("node %s: %w", sp.name, err)
		}
		h.env = []string{"LD_PRELOAD=" + b.shim, ClockFileEnv + "=" + ClockFile(sp.dir)}
	}
	ip, err := b.session.Create(ctx, sp.name, containers.Spec{Image: sp.image, Cmd: sp.idle, Dir: sp.dir})
	if err != nil {
		return nil, place{}, err
	}
	return h, place{addr: net.JoinHostPort(ip.String(), strconv.Itoa(sp.port)), peerIP: ip.String()}, nil
}

// timing implements runner: a container is slower to come up than a process.
func (b *docker) timing() (time.Duration, time.Duration) {
	return 20 * time.Second, 5 * time.Millisecond
}

func (b *docker) killFirst() bool { return false }

// close implements runner: it stops the readers of the paths still slowed, then removes every
// container and the network.
func (b *docker) close(ctx context.Context) error {
	return errors.Join(b.unslowAll(ctx), b.session.Close())
}

// dockerHost is a node's container on the local Engine.
type dockerHost struct {
	session *containers.Session
	sp      nodeSpec
	env     []string
}

// dockerProc is a server exec'd in a container, seen from the host.
type dockerProc struct{ containers.Proc }

func (p dockerProc) alive(context.Context) bool { return p.Alive() }

func (p dockerProc) pid() int { return p.Pid }

func (h *dockerHost) prepare(_ context.Context, wipe []string) error {
	for _, f := range wipe {
		os.RemoveAll(f)
	}
	return nil
}

func (h *dockerHost) launch(ctx context.Context, cmd []string) (proc, error) {
	p, err := h.session.Exec(ctx, h.sp.name, cmd, h.env, h.sp.dir)
	if err != nil {
		return nil, err
	}
	return dockerProc{p}, nil
}

func (h *dockerHost) log(_ context.Context, file string) ([]byte, error) {
	return os.ReadFile(filepath.Join(h.sp.dir, file))
}

func (h *dockerHost) output(context.Context) string { return lastLines(h.sp.dir) }

// kill is SIGKILL from the host, at once; a paused node is thawed after the signal (the freezer
// holds even a SIGKILL back), so it dies without running another instruction.
func (h *dockerHost) kill(ctx context.Context, p proc, paused bool) error {
	dp := p.(dockerProc)
	if err := dp.Kill(syscall.SIGKILL); err != nil {
		return err
	}
	if paused {
		if err := h.session.Unpause(ctx, h.sp.name); err != nil {
			return err
		}
	}
	for deadline := time.Now().Add(10 * time.Second); dp.Alive(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d still runs 10s after SIGKILL", dp.Pid)
		}
	}
	return nil
}

// signal: SIGSTOP and SIGCONT pause and continue the container; any other signal goes to the
// node's process.
func (h *dockerHost) signal(ctx context.Context, p proc, sig syscall.Signal) error {
	switch sig {
	case syscall.SIGSTOP:
		return h.session.Pause(ctx, h.sp.name)
	case syscall.SIGCONT:
		return h.session.Unpause(ctx, h.sp.name)
	}
	return p.(dockerProc).Kill(sig)
}

// setClock: the container's shim maps the same file, through the bind mount, so a write here moves
// the node's clock at its next read.
func (h *dockerHost) setClock(_ context.Context, offset time.Duration) error {
	return WriteClockOffset(ClockFile(h.sp.dir), offset)
}

// lastLines is the end of what a node wrote before it died, from its log and its output.
func lastLines(dir string) string {
	var parts []string
	for _, f := range []string{"redis.log", "stdout.log", "etcd.log"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		if s := tail(string(b), 3); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "no output"
	}
	return strings.Join(parts, " | ")
}

// CheckBackend checks that the named system runs on backend.
func CheckBackend(system, backend string) error {
	if backend == "" {
		backend = BackendLocal
	}
	if !slices.Contains(Backends(), backend) {
		return fmt.Errorf("unknown backend %q: use one of %v", backend, Backends())
	}
	t, err := Lookup(system)
	if err != nil {
		return err
	}
	if why, ok := t.Traits().NotOn[backend]; ok {
		return errors.New(why)
	}
	return nil
}

// startContainers starts the nodes' containers together (each takes the Engine a second or more on
// a loaded machine), not the nodes.
func (b *docker) startContainers(ctx context.Context, names []string) error {
	return together(names, func(name string) error { return b.session.Start(ctx, name) })
}
