package systems

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockpick-dev/lockpick/links"
)

// Ports of an etcd member in its container.
const (
	etcdClientPort = 2379
	etcdPeerPort   = 2380
)

// startEtcdDocker runs the etcd members as containers on the run's network: each member in a
// container of its own, called by its peers at its container's address (its peer URL), so raft
// traffic crosses the containers' interfaces with no proxy of the harness in its way. Clients reach
// each member's client port through their group's link. The container's own process is `sleep`
// (the member is exec'd in it, as the redis nodes are), so the image is the etcd program, sleep
// and their libraries.
func startEtcdDocker(ctx context.Context, cfg Config, dir string) (_ System, err error) {
	ec, err := cfg.Etcd.resolve()
	if err != nil {
		return nil, err
	}
	if ec.Server == "" {
		return nil, errors.New("system etcd: no etcd program given (see --etcd-server)")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return nil, fmt.Errorf("etcd on docker: the containers idle in sleep, and the host has none: install coreutils")
	}
	image, err := cfg.Docker.Engine.NodeImage(ctx, []string{ec.Server, sleep})
	if err != nil {
		return nil, err
	}
	b, err := newDocker(ctx, cfg.Docker, "", "", cfg.Logger)
	if err != nil {
		return nil, err
	}
	s := &etcdSys{cfg: ec, backend: b, links: links.New(), nodes: ec.layout(),
		peer: map[string]string{}, known: map[string]string{}, admins: map[string]*clientv3.Client{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	var names, initial []string
	for i := range s.nodes {
		n := &s.nodes[i]
		name := n.Name
		dn, err := b.add(ctx, nodeSpec{name: n.Name, dir: filepath.Join(dir, n.Name), image: image,
			idle: []string{sleep, "infinity"}, port: etcdClientPort, peerPort: etcdPeerPort,
			data:  []string{filepath.Join(dir, n.Name, "data")},
			ready: func(ctx context.Context) error { return s.serves(ctx, name) }, readyLog: etcdReadyLog})
		if err != nil {
			return nil, err
		}
		n.Addr = dn.addr
		s.peer[n.Name] = net.JoinHostPort(dn.peer.ip, strconv.Itoa(etcdPeerPort))
		s.known[n.Name] = s.peer[n.Name]
		initial = append(initial, n.Name+"=http://"+s.peer[n.Name])
		names = append(names, n.Name)
	}
	for _, n := range s.nodes {
		args, wiped := s.dockerArgs(ec.Server, filepath.Join(dir, n.Name), n, strings.Join(initial, ","))
		b.setCmd(n.Name, args, wiped)
		for _, g := range cfg.Groups {
			if _, err := s.links.Add(g, n.Name, n.Addr); err != nil {
				return nil, err
			}
		}
	}
	if err := b.startContainers(ctx, names); err != nil {
		return nil, fmt.Errorf("start etcd on docker: %w", err)
	}
	// One by one, as on the local backend: a member serves only once a majority runs.
	for _, n := range s.nodes {
		if err := b.Start(ctx, n.Name); err != nil {
			return nil, fmt.Errorf("start etcd on docker: %w", err)
		}
		c, err := adminClient(n.Addr)
		if err != nil {
			return nil, err
		}
		s.admins[n.Name] = c
	}
	s.roles = newEtcdRoles(s, cfg.Logger)
	if err := s.waitHealthy(ctx, 30*time.Second); err != nil {
		return nil, fmt.Errorf("start etcd on docker: %w", err)
	}
	return s, nil
}

// startEtcdRemote runs the etcd members in pods on a remote Engine: members call each other at
// their holders' addresses on the run's network (their peer URLs), and the harness and clients
// reach each member's client port where its pod publishes it (its advertised client URL).
func startEtcdRemote(ctx context.Context, cfg Config, dir string) (_ System, err error) {
	ec, err := cfg.Etcd.resolve()
	if err != nil {
		return nil, err
	}
	if ec.Server == "" {
		return nil, errors.New("system etcd: no etcd program given (see --etcd-server)")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return nil, fmt.Errorf("etcd on docker: the containers idle in sleep, and the host has none: install coreutils")
	}
	// A Go program reads no libc clock: no shim.
	b, image, err := newRemote(ctx, cfg, []string{ec.Server, sleep}, "", "")
	if err != nil {
		return nil, err
	}
	s := &etcdSys{cfg: ec, backend: b, links: links.New(), nodes: ec.layout(),
		peer: map[string]string{}, known: map[string]string{}, admins: map[string]*clientv3.Client{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	var names, initial []string
	for _, n := range s.nodes {
		name := n.Name
		nd := filepath.Join(dir, name)
		if _, err := b.add(ctx, nodeSpec{name: name, dir: nd, image: image,
			idle: []string{sleep, "infinity"}, port: etcdClientPort, peerPort: etcdPeerPort,
			data:     []string{filepath.Join(nd, "data")},
			ready:    func(ctx context.Context) error { return s.serves(ctx, name) },
			readyLog: etcdReadyLog}); err != nil {
			return nil, err
		}
		s.peer[name] = b.peerAddr(name, etcdPeerPort)
		s.known[name] = s.peer[name]
		initial = append(initial, name+"=http://"+s.peer[name])
		names = append(names, name)
	}
	if err := b.startPods(ctx, names); err != nil {
		return nil, fmt.Errorf("start etcd on the Docker Engine at %s: %w", cfg.Docker.Engine.Host(), err)
	}
	for i := range s.nodes {
		n := &s.nodes[i]
		n.Addr = b.published(n.Name)
		args, wiped := s.dockerArgs(ec.Server, filepath.Join(dir, n.Name), *n, strings.Join(initial, ","))
		b.setCmd(n.Name, args, wiped)
		for _, g := range cfg.Groups {
			if _, err := s.links.Add(g, n.Name, n.Addr); err != nil {
				return nil, err
			}
		}
	}
	// One by one, as on the local backend: a member serves only once a majority runs.
	for _, n := range s.nodes {
		if err := b.Start(ctx, n.Name); err != nil {
			return nil, fmt.Errorf("start etcd on the Docker Engine at %s: %w", cfg.Docker.Engine.Host(), err)
		}
		c, err := adminClient(n.Addr)
		if err != nil {
			return nil, err
		}
		s.admins[n.Name] = c
	}
	s.roles = newEtcdRoles(s, cfg.Logger)
	if err := s.waitHealthy(ctx, 30*time.Second); err != nil {
		return nil, fmt.Errorf("start etcd on the Docker Engine at %s: %w", cfg.Docker.Engine.Host(), err)
	}
	return s, nil
}

// dockerArgs is a member's command line in its container, and the one it starts with after losing
// its data (it joins the existing cluster, as on the local backend).
func (s *etcdSys) dockerArgs(server, nd string, n Node, initial string) (args, wiped []string) {
	args = []string{server,
		"--name", n.Name,
		"--data-dir", filepath.Join(nd, "data"),
		"--listen-client-urls", "http://0.0.0.0:" + strconv.Itoa(etcdClientPort),
		"--advertise-client-urls", "http://" + n.Addr,
		"--listen-peer-urls", "http://0.0.0.0:" + strconv.Itoa(etcdPeerPort),
		"--initial-advertise-peer-urls", "http://" + s.peer[n.Name],
		"--initial-cluster", initial,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", "lockpick",
		"--logger", "zap",
		"--log-outputs", filepath.Join(nd, "etcd.log"),
	}
	wiped = slices.Clone(args)
	wiped[slices.Index(wiped, "new")] = "existing"
	return args, wiped
}

// etcdDocker is the backend of etcd members in containers: etcdBackend's operations, and the
// docker backend's network cuts, of a member's interface and of the paths between members.
type etcdDocker struct {
	etcdBackend
	PeerCutter
	netCutter
}

// etcdSlowDocker is etcdDocker that also slows the paths between members (either Engine).
type etcdSlowDocker struct {
	etcdDocker
	PeerSlower
}

// netCutter is the docker backend's cut of a node's own interface (nemesis.NetCutter).
type netCutter interface {
	CutNetwork(ctx context.Context, node, mode string) error
	HealNetwork(ctx context.Context, node string) error
}
