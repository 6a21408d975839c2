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

// Kill sends SIGKILL and waits until the container has stopped. A paused container is killed too.
func (s *Session) Kill(ctx context.Context, name string) error {
	id, err := s.id(name)
	if err != nil {
		return err
	}
	wait := s.e.cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	if _, err := s.e.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("kill container of %s: %w", name, err)
	}
	select {
	case <-wait.Result:
		return nil
	case err := <-wait.Error:
		return fmt.Errorf("wait for container of %s: %w", name, err)
	}
}

// Signal sends sig to the container's process: SIGSTOP and SIGCONT pause and continue the whole
// container (its cgroup's freezer, as `docker pause`), anything else goes to its main process.
func (s *Session) Signal(ctx context.Context, name string, sig syscall.Signal) error {
	id, err := s.id(name)
	if err != nil {
		return err
	}
	switch sig {
	case syscall.SIGSTOP:
		_, err = s.e.cli.ContainerPause(ctx, id, client.ContainerPauseOptions{})
	case syscall.SIGCONT:
		_, err = s.e.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
	default:
		_, err = s.e.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: fmt.Sprint(int(sig))})
	}
	if err != nil {
		return fmt.Errorf("signal %v to container of %s: %w", sig, name, err)
	}
	return nil
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
		if _, err := s.e.cli.ContainerRemove(ctx, ids[names[i]], client.ContainerRemoveOptions{Force: true}); err != nil && !notFound(err) {
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
