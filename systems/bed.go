package systems

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// bed is a backend made ready for one system: the node table on its runner, and how a topology
// places its nodes there. On loopback (the local backend) each node is a child process listening
// on ports of its own, and servers reach each other through links; in containers (Docker, local or
// remote) each node has a container or pod of its own with fixed ports, and servers reach each other
// over the run's network, where cuts are PeerCutter's.
type bed struct {
	cfg Config
	// dir is the run's node directory, absolute.
	dir string
	// programs are the topology's programs, the server first.
	programs []string
	t        *table
	// backend is the Backend the system hands out: the table, or the docker runner around it
	// (with its network cuts and slowdowns).
	backend nodeBackend
	// loopback: the nodes are local child processes.
	loopback bool
	// image is the node image in containers.
	image  string
	docker *docker
	remote *dockerRemote
	ssh    *sshRunner
}

// openBed builds the backend cfg names for topology t: the node table on its runner, and on Docker
// the node image of t's programs (and the clock shim, when t's clocks can move).
func openBed(ctx context.Context, t Topology, cfg Config) (*bed, error) {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("system %s: %w", t.Name(), err)
	}
	progs, err := t.Programs(cfg)
	if cfg.Backend == BackendSSH {
		// The servers run on the hosts: their program is found on each host's PATH there.
		progs, err = []string{cmp.Or(cfg.RedisServer, hostProgram(t))}, nil
	}
	if err != nil {
		return nil, err
	}
	shim := cfg.ClockShim
	if t.Clocks() != nil {
		shim = ""
	}
	if shim != "" {
		if shim, err = filepath.Abs(shim); err != nil {
			return nil, fmt.Errorf("clock shim: %w", err)
		}
	}
	b := &bed{cfg: cfg, dir: dir, programs: progs}
	persist := t.persistence(cfg)
	switch {
	case cfg.Backend == BackendDocker && cfg.Docker.Engine != nil && !cfg.Docker.Engine.Local():
		b.remote, b.image, err = newRemote(ctx, cfg, progs, shim, persist)
		if err != nil {
			return nil, err
		}
		b.t, b.backend = b.remote.table, b.remote
	case cfg.Backend == BackendDocker:
		if err := b.openDocker(ctx, shim, persist); err != nil {
			return nil, err
		}
	case cfg.Backend == BackendSSH:
		if b.ssh, err = openSSH(ctx, cfg.SSH, dir, b.programs[0], shim, persist, cfg.Logger); err != nil {
			return nil, err
		}
		b.t, b.backend = b.ssh.table, b.ssh
	default:
		b.t = newTable(localRunner{shim}, shim, persist, cfg.Logger)
		b.backend, b.loopback = b.t, true
	}
	return b, nil
}

// openDocker builds the node image and opens the run's session on the local Engine.
func (b *bed) openDocker(ctx context.Context, shim string, persist Persistence) error {
	if b.cfg.Docker.Engine == nil {
		return fmt.Errorf("the docker backend needs a Docker Engine connection")
	}
	files := b.programs
	if shim != "" {
		files = append(files[:len(files):len(files)], shim)
	}
	image, err := b.cfg.Docker.Engine.NodeImage(ctx, files)
	if err != nil {
		return err
	}
	d, err := newDocker(ctx, b.cfg.Docker, shim, persist, b.cfg.Logger)
	if err != nil {
		return err
	}
	b.docker, b.image, b.t, b.backend = d, image, d.table, d
	return nil
}

// where says where the nodes run, for an error: "", " on docker" or " on the Docker Engine at ...".
func (b *bed) where() string {
	switch {
	case b.remote != nil:
		return " on the Docker Engine at " + b.cfg.Docker.Engine.Host()
	case b.docker != nil:
		return " on docker"
	case b.ssh != nil:
		return " on the hosts " + strings.Join(b.cfg.SSH.Hosts, ",")
	}
	return ""
}

// nodeDir is a node's directory.
func (b *bed) nodeDir(name string) string {
	if b.ssh != nil {
		return b.ssh.nodeDir(name)
	}
	return filepath.Join(b.dir, name)
}

// hostProgram is the program of a topology's server as a host's PATH names it.
func hostProgram(t Topology) string {
	if t.Traits().Server == "etcd-server" {
		return "etcd"
	}
	return t.Traits().Server
}

// reserve holds count free loopback ports for nodes (on loopback only): each stays held until
// its node starts.
func (b *bed) reserve(count int) ([]net.Listener, error) {
	return nodePorts(count, b.cfg.BasePort)
}

// place declares the nodes and, in containers, starts their containers (pods) together, not the
// nodes; a remote pod's published address is known then.
func (b *bed) place(ctx context.Context, specs []nodeSpec) error {
	var names []string
	for _, sp := range specs {
		if sp.image == "" {
			sp.image = b.image
		}
		if _, err := b.t.add(ctx, sp); err != nil {
			return err
		}
		names = append(names, sp.name)
	}
	switch {
	case b.remote != nil:
		return b.remote.startPods(ctx, names)
	case b.docker != nil:
		return b.docker.startContainers(ctx, names)
	}
	return nil
}

// peerAddr is where other servers call a node's port in containers.
func (b *bed) peerAddr(name string, port int) string {
	n, err := b.t.node(name)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(n.peer.ip, fmt.Sprint(port))
}

// writeFile writes a file of a node's directory (its configuration), where its server reads it:
// on this host, or in the node's container on a remote Engine.
func (b *bed) writeFile(ctx context.Context, name, path string, body []byte) error {
	if b.remote != nil {
		return b.remote.session.WriteFiles(ctx, name, filepath.Dir(path), map[string][]byte{filepath.Base(path): body})
	}
	if b.ssh != nil {
		return b.ssh.writeFile(ctx, name, path, body)
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return fmt.Errorf("node %s: write %s: %w", name, path, err)
	}
	return nil
}

// startTogether starts the named nodes: one by one on loopback, at once in containers (each takes
// the Engine a second or more).
func (b *bed) startTogether(ctx context.Context, names []string) error {
	if !b.loopback {
		return b.t.startTogether(ctx, names)
	}
	for _, name := range names {
		if err := b.t.Start(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// nopLogger discards everything.
func nopLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
