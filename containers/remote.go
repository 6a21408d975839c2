package containers

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// A remote Engine shares nothing with this host but its API: no files, no pids, no namespaces,
// no route to its bridge networks. A node there is a pod of two containers: a network holder
// that owns the node's address on the run's network, publishes its port on the Engine host and
// carries NET_ADMIN (network cuts are iptables run in it), and the node's own container joined to
// the holder's network namespace. The node's container can then be killed and started again (a
// node killed while paused) without losing its address, its published port or a cut in effect.

// IsLocalHost reports whether an Engine address (empty: DOCKER_HOST, else the local socket) is a
// unix socket on this host.
func IsLocalHost(host string) bool {
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	return host == "" || strings.HasPrefix(host, "unix://")
}

// PublishHost is the address at which this host reaches the ports the Engine publishes: the host
// of the Engine's own address (tcp://HOST:PORT).
func (e *Engine) PublishHost() (string, error) {
	u, err := url.Parse(e.host)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("the Docker Engine at %q names no host to reach its published ports at: use tcp://HOST:PORT, or say where they are with --docker-publish-host", e.host)
	}
	return u.Hostname(), nil
}

// BindFor is the Engine host's address to publish ports on when this host reaches them at
// publishHost: a loopback address is this very host (publish nowhere else); anything else may be
// an address the Engine host does not know it has (NAT), so every address.
func BindFor(publishHost string) netip.Addr {
	if a, err := netip.ParseAddr(publishHost); err == nil && a.IsLoopback() {
		return a
	}
	return netip.IPv4Unspecified()
}

// PodSpec is a node's pod on a remote Engine.
type PodSpec struct {
	Image string
	// Idle is the main process of both containers: it must do nothing and hold no port.
	Idle []string
	// Port is the node's TCP port, published on the Engine host.
	Port int
	// PublishHost is where this host reaches the published port.
	PublishHost string
	// Dir is the node's working directory inside its container.
	Dir string
	// ClockDir is a volume of the holder that the node's container shares: the holder (never
	// paused, never killed) writes the clock file there in place, and the node's shim maps it.
	ClockDir string
	// ClockFile is the clock file's name in ClockDir, created holding a zero offset.
	ClockFile string
}

// holder is the name of a node's network holder.
func holder(name string) string { return name + "-net" }

// CreatePod creates a node's network holder and its container (neither started) and returns the
// node's address on the run's network.
func (s *Session) CreatePod(ctx context.Context, name string, spec PodSpec) (netip.Addr, error) {
	s.mu.Lock()
	s.next++
	ip := s.subnet.Addr().As4()
	ip[3] = byte(s.next)
	s.mu.Unlock()
	addr := netip.AddrFrom4(ip)
	port, err := network.ParsePort(strconv.Itoa(spec.Port) + "/tcp")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("node %s: %w", name, err)
	}
	hostIP := BindFor(spec.PublishHost)
	hid, err := s.create(ctx, holder(name), client.ContainerCreateOptions{
		Config: &container.Config{Image: spec.Image, Cmd: spec.Idle, Labels: s.labels, Hostname: name,
			ExposedPorts: network.PortSet{port: {}}, Volumes: map[string]struct{}{spec.ClockDir: {}}},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(s.Network), CapAdd: []string{"NET_ADMIN"},
			PortBindings: network.PortMap{port: {{HostIP: hostIP}}}},
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			s.Network: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: addr}},
		}},
	})
	if err != nil {
		return netip.Addr{}, err
	}
	if _, err := s.create(ctx, name, client.ContainerCreateOptions{
		Config:     &container.Config{Image: spec.Image, Cmd: spec.Idle, WorkingDir: spec.Dir, Labels: s.labels},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode("container:" + hid), VolumesFrom: []string{hid}},
	}); err != nil {
		return netip.Addr{}, err
	}
	if err := s.WriteFiles(ctx, holder(name), spec.ClockDir, map[string][]byte{spec.ClockFile: make([]byte, 8)}); err != nil {
		return netip.Addr{}, err
	}
	return addr, nil
}

// create creates a container named after the session and records it under name.
func (s *Session) create(ctx context.Context, name string, opts client.ContainerCreateOptions) (string, error) {
	opts.Name = s.Network + "-" + name
	res, err := s.e.cli.ContainerCreate(ctx, opts)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", opts.Name, err)
	}
	s.mu.Lock()
	s.ids[name] = res.ID
	s.names = append(s.names, name)
	s.mu.Unlock()
	return res.ID, nil
}

// StartPod starts a node's holder and container, and returns the port the Engine host publishes
// the node's port on.
func (s *Session) StartPod(ctx context.Context, name string, port int) (string, error) {
	if err := s.Start(ctx, holder(name)); err != nil {
		return "", err
	}
	id, err := s.id(holder(name))
	if err != nil {
		return "", err
	}
	res, err := s.e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspect the network holder of %s: %w", name, err)
	}
	var published string
	if ns := res.Container.NetworkSettings; ns != nil {
		for p, bs := range ns.Ports {
			if int(p.Num()) == port && len(bs) > 0 {
				published = bs[0].HostPort
			}
		}
	}
	if published == "" {
		return "", fmt.Errorf("node %s: the Engine published no host port for its port %d", name, port)
	}
	return published, s.Start(ctx, name)
}

// KillContainer kills a container's every process (SIGKILL to its main process, the init of its
// pid namespace; the Engine thaws a paused container after the signal) and waits until it stopped.
func (s *Session) KillContainer(ctx context.Context, name string) error {
	id, err := s.id(name)
	if err != nil {
		return err
	}
	if _, err := s.e.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("kill container of %s: %w", name, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		res, err := s.e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("inspect container of %s: %w", name, err)
		}
		if res.Container.State == nil || !res.Container.State.Running {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("container of %s still runs 30s after SIGKILL", name)
		}
	}
}

// ExecID is a process started in a container with ExecDetached, as the Engine knows it.
type ExecID string

// ExecDetached starts cmd in the running container of name and returns once it runs (or failed).
func (s *Session) ExecDetached(ctx context.Context, name string, cmd, env []string, dir string) (ExecID, error) {
	id, err := s.id(name)
	if err != nil {
		return "", err
	}
	ex, err := s.e.cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: cmd, Env: env, WorkingDir: dir})
	if err != nil {
		return "", fmt.Errorf("exec in container of %s: %w", name, err)
	}
	if _, err := s.e.cli.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true}); err != nil {
		return "", fmt.Errorf("exec in container of %s: %w", name, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		in, err := s.e.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return "", fmt.Errorf("exec in container of %s: %w", name, err)
		}
		if in.PID > 0 {
			return ExecID(ex.ID), nil
		}
		if !in.Running && in.ExitCode != 0 {
			return "", fmt.Errorf("exec in container of %s: %s exited with status %d", name, cmd[0], in.ExitCode)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("exec in container of %s: no process after 10s", name)
		}
	}
}

// Running reports whether a process ExecDetached started still runs.
func (s *Session) Running(ctx context.Context, ex ExecID) (bool, error) {
	if ex == "" {
		return false, nil
	}
	in, err := s.e.cli.ExecInspect(ctx, string(ex), client.ExecInspectOptions{})
	if err != nil {
		if notFound(err) {
			return false, nil // its container was killed and the Engine forgot it
		}
		return false, fmt.Errorf("inspect exec: %w", err)
	}
	return in.Running, nil
}

// WriteFiles writes files (name -> content) into dir in the container of name, which need not run.
// An existing file is replaced by a new one (a process that mapped the old one keeps it).
func (s *Session) WriteFiles(ctx context.Context, name, dir string, files map[string][]byte) error {
	id, err := s.id(name)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for f, b := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f, Mode: 0o644, Size: int64(len(b))}); err != nil {
			return fmt.Errorf("write files of %s: %w", name, err)
		}
		if _, err := tw.Write(b); err != nil {
			return fmt.Errorf("write files of %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write files of %s: %w", name, err)
	}
	if err := s.mkdir(ctx, id, dir); err != nil {
		return fmt.Errorf("write files of %s: %w", name, err)
	}
	if _, err := s.e.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: dir, Content: &buf}); err != nil {
		return fmt.Errorf("write files of %s into %s: %w", name, dir, err)
	}
	return nil
}

// mkdir makes dir and its parents in a container (the Engine makes a working directory only when
// the container starts).
func (s *Session) mkdir(ctx context.Context, id, dir string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	parts := strings.Split(strings.Trim(dir, "/"), "/")
	for i := range parts {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.Join(parts[:i+1], "/") + "/", Mode: 0o755}); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	_, err := s.e.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/", Content: &buf})
	return err
}

// ReadFile reads a file of the container of name (running, stopped or paused).
func (s *Session) ReadFile(ctx context.Context, name, path string) ([]byte, error) {
	id, err := s.id(name)
	if err != nil {
		return nil, err
	}
	res, err := s.e.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		return nil, fmt.Errorf("read %s of %s: %w", path, name, err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	if _, err := tr.Next(); err != nil {
		return nil, fmt.Errorf("read %s of %s: %w", path, name, err)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		return nil, fmt.Errorf("read %s of %s: %w", path, name, err)
	}
	return b, nil
}

// CopyOut copies the regular files under dir in the container of name into hostDir (the node's
// log and data, kept in the run's store after its container is gone).
func (s *Session) CopyOut(ctx context.Context, name, dir, hostDir string) error {
	id, err := s.id(name)
	if err != nil {
		return err
	}
	res, err := s.e.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: dir + "/."})
	if err != nil {
		return fmt.Errorf("copy %s out of %s: %w", dir, name, err)
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("copy %s out of %s: %w", dir, name, err)
		}
		// The archive's names are relative to the copied directory ("./redis.log").
		rel := filepath.Clean(hdr.Name)
		if rel == "." || !filepath.IsLocal(rel) {
			continue
		}
		dst := filepath.Join(hostDir, rel)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeHostFile(dst, tr); err != nil {
				return fmt.Errorf("copy %s out of %s: %w", dir, name, err)
			}
		}
	}
}

func writeHostFile(dst string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Subnet is the run's network: the nodes' own addresses, and the holders' peers.
func (s *Session) Subnet() netip.Prefix { return s.subnet }

// RunVolumes are the volumes mounted by the containers of the runs whose label starts with run
// (the holders' anonymous clock volumes): what a test expects to find gone with them.
func (e *Engine) RunVolumes(ctx context.Context, run string) ([]string, error) {
	cs, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", LabelRun)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	seen := map[string]bool{}
	var vols []string
	for _, c := range cs.Items {
		if !strings.HasPrefix(c.Labels[LabelRun], run) {
			continue
		}
		for _, m := range c.Mounts {
			if m.Name != "" && !seen[m.Name] {
				seen[m.Name] = true
				vols = append(vols, m.Name)
			}
		}
	}
	return vols, nil
}

// VolumeExists reports whether the Engine still has the named volume.
func (e *Engine) VolumeExists(ctx context.Context, name string) (bool, error) {
	_, err := e.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	if notFound(err) {
		return false, nil
	}
	return err == nil, err
}
