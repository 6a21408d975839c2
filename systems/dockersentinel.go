package systems

import (
	"context"
	"fmt"
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
			data = []string{filepath.Join(nd, "dump.rdb"), filepath.Join(nd, "appendonlydir")}
		}
		dn, err := b.addNode(ctx, dockerSpec{name: n.Name, dir: nd, image: image, idle: idle, port: port, peerPort: port, data: data, shim: true})
		if err != nil {
			return nil, err
		}
		n.Addr = dn.addr
		s.known[n.Name], s.byKnown[dn.addr] = dn.addr, n.Name
		names = append(names, n.Name)
	}
	for _, n := range s.nodes {
		args, err := s.writeDockerConf(filepath.Join(dir, n.Name), n, persist)
		if err != nil {
			return nil, err
		}
		dn, _ := b.node(n.Name)
		dn.cmd = append([]string{bin}, args...)
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

// writeDockerConf writes a node's configuration file in its directory and returns the server's
// arguments. Each server listens on every interface of its container and is known by its container's
// address, so nothing needs announcing: Sentinel monitors the primary's address, replicas replicate
// from it, and the sentinels find each other by the addresses their hellos come from.
func (s *sentinelSys) writeDockerConf(nd string, n Node, persist clusters.Persistence) ([]string, error) {
	_, port, _ := strings.Cut(n.Addr, ":")
	primary := s.nodes[0].Addr
	pip, pport, _ := strings.Cut(primary, ":")
	lines := []string{
		"port " + port,
		"bind 0.0.0.0",
		"protected-mode no",
		"daemonize no",
		"dir " + nd,
		"logfile " + filepath.Join(nd, "redis.log"),
	}
	conf := filepath.Join(nd, "redis.conf")
	args := []string{conf}
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
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("node %s: write %s: %w", n.Name, conf, err)
	}
	return args, nil
}
