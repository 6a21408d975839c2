package systems

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/clusters"
	"github.com/lockpick-dev/lockpick/links"
)

// Ports of redis-sentinel's servers in their containers.
const (
	sentinelPort = 26379
)

// startSentinelDocker runs redis-sentinel as containers on the run's network: the primary, its
// replicas and the sentinels each in a container of its own, talking to each other over their
// containers' addresses, which are also the addresses the servers announce (a sentinel's "where is
// the master" answer, a replica's address in the primary's list). Clients reach every node through
// their group's link, and map the announced address to it by Endpoint.Known. A path between servers
// is cut by rules in the caller's namespace (PeerCutter), not by a link.
func startSentinelDocker(ctx context.Context, cfg Config, dir string) (_ System, err error) {
	sc, err := cfg.Sentinel.resolve()
	if err != nil {
		return nil, err
	}
	bin, err := clusters.FindRedisServer(cfg.RedisServer)
	if err != nil {
		return nil, err
	}
	files := []string{bin}
	if cfg.ClockShim != "" {
		files = append(files, cfg.ClockShim)
	}
	image, err := cfg.Docker.Engine.NodeImage(ctx, files)
	if err != nil {
		return nil, err
	}
	persist := persistence(cfg.Persistence)
	b, err := newDocker(ctx, cfg.Docker, cfg.ClockShim, persist, cfg.Logger)
	if err != nil {
		return nil, err
	}
	s := &sentinelSys{cfg: sc, backend: b, links: links.New(), nodes: sc.layout(), known: map[string]string{}, byKnown: map[string]string{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	idle := []string{bin, "--port", "0", "--unixsocket", "/tmp/idle.sock", "--save", "", "--appendonly", "no", "--dir", "/tmp"}
	var names []string
	for i := range s.nodes {
		n := &s.nodes[i]
		port := redisPort
		if n.Role == RoleSentinel {
			port = sentinelPort
		}
		nd := filepath.Join(dir, n.Name)
		var data []string
		if n.Data {
			data = redisData(nd)
		}
		dn, err := b.add(ctx, nodeSpec{name: n.Name, dir: nd, image: image, idle: idle, port: port, peerPort: port, data: data, shim: true})
		if err != nil {
			return nil, err
		}
		n.Addr = dn.addr
		s.known[n.Name], s.byKnown[dn.addr] = dn.addr, n.Name
		names = append(names, n.Name)
	}
	for _, n := range s.nodes {
		nd := filepath.Join(dir, n.Name)
		conf, body, args := s.dockerConf(nd, n, persist)
		if err := os.WriteFile(conf, body, 0o644); err != nil {
			return nil, fmt.Errorf("node %s: write %s: %w", n.Name, conf, err)
		}
		b.setCmd(n.Name, append([]string{bin}, args...), nil)
	}
	for _, n := range s.nodes {
		for _, g := range cfg.Groups {
			if _, err := s.links.Add(g, n.Name, n.Addr); err != nil {
				return nil, err
			}
		}
	}
	if err := b.startContainers(ctx, names); err != nil {
		return nil, fmt.Errorf("start redis-sentinel on docker: %w", err)
	}
	if err := s.startAll(ctx); err != nil {
		return nil, fmt.Errorf("start redis-sentinel on docker: %w", err)
	}
	s.watch = newWatcher(s, cfg.Logger)
	return s, nil
}

// dockerConf is a node's configuration file (its path and content) and the server's arguments.
// Each server listens on every interface of its container and is known by its container's address
// (s.known), so nothing needs announcing: Sentinel monitors the primary's address, replicas
// replicate from it, and the sentinels find each other by the addresses their hellos come from.
func (s *sentinelSys) dockerConf(nd string, n Node, persist clusters.Persistence) (conf string, body []byte, args []string) {
	_, port, _ := net.SplitHostPort(s.known[n.Name])
	pip, pport, _ := net.SplitHostPort(s.known[s.nodes[0].Name])
	lines := []string{
		"port " + port,
		"bind 0.0.0.0",
		"protected-mode no",
		"daemonize no",
		"dir " + nd,
		"logfile " + filepath.Join(nd, "redis.log"),
	}
	conf = filepath.Join(nd, "redis.conf")
	args = []string{conf}
	if n.Role == RoleSentinel {
		conf = filepath.Join(nd, "sentinel.conf")
		args = []string{conf, "--sentinel"}
		lines = append(lines,
			"sentinel resolve-hostnames no",
			fmt.Sprintf("sentinel monitor %s %s %s %d", MasterName, pip, pport, s.cfg.Quorum),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", MasterName, s.cfg.DownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", MasterName, s.cfg.FailoverTimeout.Milliseconds()),
			fmt.Sprintf("sentinel parallel-syncs %s 1", MasterName),
		)
	} else {
		lines = append(lines,
			`save ""`,
			"appendfilename appendonly.aof",
			"repl-diskless-sync yes",
			"repl-diskless-sync-delay 0",
			"min-replicas-to-write "+strconv.Itoa(s.cfg.MinReplicasToWrite),
			"min-replicas-max-lag "+strconv.Itoa(int(s.cfg.MinReplicasMaxLag/time.Second)),
		)
		lines = append(lines, persistLines(persist)...)
		if n.Role == RoleReplica {
			lines = append(lines, "replicaof "+pip+" "+pport)
		}
	}
	return conf, []byte(strings.Join(lines, "\n") + "\n"), args
}

// startSentinelRemote runs redis-sentinel in pods on a remote Engine: the servers call each other
// at their holders' addresses on the run's network (what they announce, Endpoint.Known), and the
// harness and clients reach each node at the port its pod publishes.
func startSentinelRemote(ctx context.Context, cfg Config, dir string) (_ System, err error) {
	sc, err := cfg.Sentinel.resolve()
	if err != nil {
		return nil, err
	}
	bin, err := clusters.FindRedisServer(cfg.RedisServer)
	if err != nil {
		return nil, err
	}
	persist := persistence(cfg.Persistence)
	b, image, err := newRemote(ctx, cfg, []string{bin}, cfg.ClockShim, persist)
	if err != nil {
		return nil, err
	}
	s := &sentinelSys{cfg: sc, backend: b, links: links.New(), nodes: sc.layout(), known: map[string]string{}, byKnown: map[string]string{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	var names []string
	for i := range s.nodes {
		n := &s.nodes[i]
		port := redisPort
		if n.Role == RoleSentinel {
			port = sentinelPort
		}
		nd := filepath.Join(dir, n.Name)
		var data []string
		if n.Data {
			data = redisData(nd)
		}
		if _, err := b.add(ctx, nodeSpec{name: n.Name, dir: nd, image: image, idle: redisIdle(bin), port: port, peerPort: port, data: data, shim: true}); err != nil {
			return nil, err
		}
		known := b.peerAddr(n.Name, port)
		s.known[n.Name], s.byKnown[known] = known, n.Name
		names = append(names, n.Name)
	}
	if err := b.startPods(ctx, names); err != nil {
		return nil, fmt.Errorf("start redis-sentinel on the Docker Engine at %s: %w", cfg.Docker.Engine.Host(), err)
	}
	for i := range s.nodes {
		n := &s.nodes[i]
		n.Addr = b.published(n.Name)
		conf, body, args := s.dockerConf(filepath.Join(dir, n.Name), *n, persist)
		if err := b.session.WriteFiles(ctx, n.Name, filepath.Dir(conf), map[string][]byte{filepath.Base(conf): body}); err != nil {
			return nil, err
		}
		b.setCmd(n.Name, append([]string{bin}, args...), nil)
		for _, g := range cfg.Groups {
			if _, err := s.links.Add(g, n.Name, n.Addr); err != nil {
				return nil, err
			}
		}
	}
	if err := s.startAll(ctx); err != nil {
		return nil, fmt.Errorf("start redis-sentinel on the Docker Engine at %s: %w", cfg.Docker.Engine.Host(), err)
	}
	s.watch = newWatcher(s, cfg.Logger)
	return s, nil
}
