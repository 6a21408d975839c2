package containers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// Session is one run's network and containers. Close removes them all.
type Session struct {
	e      *Engine
	run    string
	labels map[string]string
	// Network is the run's bridge network's name.
	Network string
	subnet  netip.Prefix

	mu    sync.Mutex
	ids   map[string]string // container name -> id, in creation order in names
	names []string
	next  int // last address handed out, as an offset into the subnet
}

// NewSession creates a run's private bridge network, labelled with run (the run's directory), on a
// /24 subnet of 10.213.0.0/16 that no other network holds, so that each container keeps its
// address across restarts.
func (e *Engine) NewSession(ctx context.Context, run string) (*Session, error) {
	s := &Session{e: e, run: run, ids: map[string]string{}, next: 9,
		labels: map[string]string{LabelRun: run, LabelOwner: Owner()}}
	s.Network = fmt.Sprintf("lockpick-%08x", rand.Uint32())
	var last error
	for range 16 {
		s.subnet = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, byte(rand.IntN(256)), 0}), 24)
		_, err := e.cli.NetworkCreate(ctx, s.Network, client.NetworkCreateOptions{
			Driver: "bridge", Labels: s.labels,
			IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: s.subnet}}},
		})
		if err == nil {
			return s, nil
		}
		last = err
		if !strings.Contains(err.Error(), "overlap") {
			break
		}
	}
	return nil, fmt.Errorf("create network %s: %w", s.Network, last)
}

// Spec is a container to create.
type Spec struct {
	Image string
	Cmd   []string
	Env   []string
	// Dir is the working directory, bind-mounted from the host at the same path (the node's data,
	// its log and its clock file live there, where the harness reads and writes them).
	Dir string
}

// Create creates a container (not started) on the session's network with an address of its own,
// and returns that address.
func (s *Session) Create(ctx context.Context, name string, spec Spec) (netip.Addr, error) {
	s.mu.Lock()
	s.next++
	ip := s.subnet.Addr().As4()
	ip[3] = byte(s.next)
	s.mu.Unlock()
	addr := netip.AddrFrom4(ip)
	var binds []string
	if spec.Dir != "" {
		binds = []string{spec.Dir + ":" + spec.Dir}
	}
	cname := s.Network + "-" + name
	res, err := s.e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: cname,
		Config: &container.Config{
			Image: spec.Image, Cmd: spec.Cmd, Env: spec.Env, WorkingDir: spec.Dir, Labels: s.labels, Hostname: name,
		},
		HostConfig: &container.HostConfig{Binds: binds, NetworkMode: container.NetworkMode(s.Network)},
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			s.Network: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: addr}},
		}},
	})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("create container %s: %w", cname, err)
	}
	s.mu.Lock()
	s.ids[name] = res.ID
	s.names = append(s.names, name)
	s.mu.Unlock()
	return addr, nil
}

func (s *Session) id(name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.ids[name]
	if !ok {
		return "", fmt.Errorf("no container for node %q", name)
	}
	return id, nil
}

// Start starts a created or stopped container.
func (s *Session) Start(ctx context.Context, name string) error {
	id, err := s.id(name)
	if err != nil {
		return err
	}
	if _, err := s.e.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start container of %s: %w", name, err)
	}
	return nil
}

// Pause freezes every process of the container (`docker pause`: the freezer cgroup).
func (s *Session) Pause(ctx context.Context, name string) error {
	id, err := s.id(name)
	if err != nil {
		return err
	}
	if _, err := s.e.cli.ContainerPause(ctx, id, client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("pause container of %s: %w", name, err)
	}
	return s.awaitPaused(ctx, name, id, true)
}

// Unpause thaws a paused container.
func (s *Session) Unpause(ctx context.Context, name string) error {
	id, err := s.id(name)
	if err != nil {
		return err
	}
	if _, err := s.e.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("unpause container of %s: %w", name, err)
	}
	return s.awaitPaused(ctx, name, id, false)
}

// awaitPaused waits until the Engine's own view of the container says paused is want. The Engine
// answers a pause or unpause once the freezer has done it but records the new state only when
// containerd's event arrives, and until then refuses an exec into a thawed container.
func (s *Session) awaitPaused(ctx context.Context, name, id string, want bool) error {
	for deadline := time.Now().Add(10 * time.Second); ; {
		res, err := s.e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("inspect container of %s: %w", name, err)
		}
		if res.Container.State != nil && res.Container.State.Paused == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("container of %s: the Engine still says paused=%v 10s after it was asked otherwise", name, !want)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container of %s: %w", name, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// Proc is a process run in a container, as the host sees it: its pid and its start time, so a pid
// the kernel gave to another process is never taken for it.
type Proc struct {
	Pid   int
	start string
}

// Alive reports whether the process still runs (a zombie does not).
func (p Proc) Alive() bool { return p.Pid > 0 && p.start != "" && procStart(p.Pid) == p.start }

// Kill sends sig to the process if it still runs.
func (p Proc) Kill(sig syscall.Signal) error {
	if !p.Alive() {
		return nil
	}
	if err := syscall.Kill(p.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %v to pid %d: %w", sig, p.Pid, err)
	}
	return nil
}

// Exec starts cmd in the running container of name, detached, with env added to its environment
// and dir as its working directory, and returns the process once it runs. A node restarted this way
// comes back in milliseconds, in the same network namespace, where starting a container again takes
// the Engine seconds.
func (s *Session) Exec(ctx context.Context, name string, cmd, env []string, dir string) (Proc, error) {
	id, err := s.id(name)
	if err != nil {
		return Proc{}, err
	}
	ex, err := s.e.cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: cmd, Env: env, WorkingDir: dir})
	if err != nil {
		return Proc{}, fmt.Errorf("exec in container of %s: %w", name, err)
	}
	if _, err := s.e.cli.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true}); err != nil {
		return Proc{}, fmt.Errorf("exec in container of %s: %w", name, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		in, err := s.e.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return Proc{}, fmt.Errorf("exec in container of %s: %w", name, err)
		}
		if in.PID > 0 {
			return Proc{Pid: in.PID, start: procStart(in.PID)}, nil
		}
		if !in.Running && in.ExitCode != 0 {
			return Proc{}, fmt.Errorf("exec in container of %s: %s exited with status %d", name, cmd[0], in.ExitCode)
		}
		if time.Now().After(deadline) {
			return Proc{}, fmt.Errorf("exec in container of %s: no process after 10s", name)
		}
	}
}

// Pid is the host pid of a running container's main process, or 0.
func (s *Session) Pid(ctx context.Context, name string) int {
	id, err := s.id(name)
	if err != nil {
		return 0
	}
	res, err := s.e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil || res.Container.State == nil {
		return 0
	}
	return res.Container.State.Pid
}

// Close removes every container of the session (running or not) and then its network. It keeps
// going past errors, and works on a context of its own: it runs after an interrupt too.
func (s *Session) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.mu.Lock()
	names := append([]string(nil), s.names...)
	ids := s.ids
	s.ids, s.names = map[string]string{}, nil
	s.mu.Unlock()
	var errs []error
	for i := len(names) - 1; i >= 0; i-- {
		if _, err := s.e.cli.ContainerRemove(ctx, ids[names[i]], client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("remove container of %s: %w", names[i], err))
		}
	}
	if s.Network != "" {
		if _, err := s.e.cli.NetworkRemove(ctx, s.Network, client.NetworkRemoveOptions{}); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", s.Network, err))
		}
	}
	return errors.Join(errs...)
}

// Gateway is the host's address on the session's network: where traffic from the harness comes from.
func (s *Session) Gateway() netip.Addr {
	ip := s.subnet.Addr().As4()
	ip[3] = 1
	return netip.AddrFrom4(ip)
}

func notFound(err error) bool { return cerrdefs.IsNotFound(err) }
