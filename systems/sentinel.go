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

	"github.com/lockpick-dev/lockpick/links"
)

// MasterName is the name the sentinels monitor the primary under.
const MasterName = "lockpick"

// SentinelConfig is the layout and timing of redis-sentinel. Zero values take the defaults.
type SentinelConfig struct {
	// Replicas is how many replicas copy the primary; default 2.
	Replicas int `json:"replicas,omitempty"`
	// Sentinels is how many sentinels watch it; default 3.
	Sentinels int `json:"sentinels,omitempty"`
	// Quorum is how many sentinels must agree the primary is down; default a majority of them.
	Quorum int `json:"quorum,omitempty"`
	// DownAfter is how long the primary must not answer before a sentinel thinks it down; default 2s.
	// Not less: a sentinel connects to a newly promoted primary on its reconnect tick, once a second
	// (Sentinel's ping period), and counts the wait against down-after; at 1s a sentinel that came
	// to the new primary late marked it down, its peers' votes about the old primary (kept 5s) made
	// that objective at once, and a healthy primary was failed over a second after its promotion.
	DownAfter time.Duration `json:"down_after,omitempty"`
	// FailoverTimeout bounds a failover and spaces retries of one; default 3s.
	FailoverTimeout time.Duration `json:"failover_timeout,omitempty"`
	// MinReplicasToWrite makes the primary refuse writes while fewer replicas are connected with a
	// lag under MinReplicasMaxLag (Redis's min-replicas-to-write); default 0, off.
	MinReplicasToWrite int `json:"min_replicas_to_write,omitempty"`
	// MinReplicasMaxLag is the lag beyond which a replica does not count; whole seconds, default 1s.
	MinReplicasMaxLag time.Duration `json:"min_replicas_max_lag,omitempty"`
}

func (c SentinelConfig) resolve() (SentinelConfig, error) {
	if c.Replicas == 0 {
		c.Replicas = 2
	}
	if c.Sentinels == 0 {
		c.Sentinels = 3
	}
	if c.Quorum == 0 {
		c.Quorum = c.Sentinels/2 + 1
	}
	if c.DownAfter == 0 {
		c.DownAfter = 2 * time.Second
	}
	if c.FailoverTimeout == 0 {
		c.FailoverTimeout = 3 * time.Second
	}
	if c.MinReplicasMaxLag == 0 {
		c.MinReplicasMaxLag = time.Second
	}
	switch {
	case c.Replicas < 1 || c.Replicas > 9:
		return c, fmt.Errorf("redis-sentinel: replicas must lie between 1 and 9 (a failover needs a replica to promote), got %d", c.Replicas)
	case c.Sentinels < 1 || c.Sentinels > 9:
		return c, fmt.Errorf("redis-sentinel: sentinels must lie between 1 and 9, got %d", c.Sentinels)
	case c.Quorum < 1 || c.Quorum > c.Sentinels:
		return c, fmt.Errorf("redis-sentinel: quorum must lie between 1 and the number of sentinels (%d), got %d", c.Sentinels, c.Quorum)
	case c.DownAfter < time.Millisecond:
		return c, fmt.Errorf("redis-sentinel: down-after must be at least 1ms, got %v", c.DownAfter)
	case c.FailoverTimeout < time.Millisecond:
		return c, fmt.Errorf("redis-sentinel: failover-timeout must be at least 1ms, got %v", c.FailoverTimeout)
	case c.MinReplicasToWrite < 0 || c.MinReplicasToWrite > c.Replicas:
		return c, fmt.Errorf("redis-sentinel: min-replicas-to-write must lie between 0 and the number of replicas (%d), got %d", c.Replicas, c.MinReplicasToWrite)
	case c.MinReplicasMaxLag < time.Second || c.MinReplicasMaxLag%time.Second != 0:
		return c, fmt.Errorf("redis-sentinel: min-replicas-max-lag is whole seconds (Redis counts it so), got %v", c.MinReplicasMaxLag)
	}
	return c, nil
}

// layout names the nodes: n1 the first primary, n2.. its replicas, s1.. the sentinels.
func (c SentinelConfig) layout() []Node {
	var nodes []Node
	for i := range c.Replicas + 1 {
		role := RoleReplica
		if i == 0 {
			role = RolePrimary
		}
		nodes = append(nodes, Node{Name: fmt.Sprintf("n%d", i+1), Role: role, Data: true})
	}
	for i := range c.Sentinels {
		nodes = append(nodes, Node{Name: fmt.Sprintf("s%d", i+1), Role: RoleSentinel})
	}
	return nodes
}

// sentinelSys is redis-sentinel: one primary, its replicas and the sentinels that fail it over, all
// redis-server 7 processes. Every path goes through a link: clients to every node, each replica to
// each possible master, each sentinel to every node and to every other sentinel. Each node has a
// known address (the one the servers tell each other, and the one Sentinel monitors) served by a
// router that sends each connection through the link of its source, so Sentinel's rewriting of a
// replica's master address (+fix-slave-config) cannot bypass a link: the address it writes is the
// router's.
type sentinelSys struct {
	cfg     SentinelConfig
	backend nodeBackend
	links   *links.Set
	// router is nil on the docker backend: its servers reach each other over their own interfaces.
	router *links.Router
	watch  *watcher

	nodes   []Node
	known   map[string]string // node -> known address
	byKnown map[string]string // known address -> node
	holds   holdClients
}

// sentinelTopology is redis-sentinel.
type sentinelTopology struct{}

// Name implements Topology.
func (sentinelTopology) Name() string { return "redis-sentinel" }

// Layout implements Topology: n1 the first primary, n2.. its replicas (default 2), s1.. the
// sentinels (default 3).
func (sentinelTopology) Layout(cfg Config) ([]Node, error) {
	sc, err := cfg.Sentinel.resolve()
	if err != nil {
		return nil, err
	}
	return sc.layout(), nil
}

// Programs implements Topology: the sentinels are redis-server too.
func (sentinelTopology) Programs(cfg Config) ([]string, error) { return redisPrograms(cfg) }

// Clocks implements Topology.
func (sentinelTopology) Clocks() error { return nil }

// Traits implements Topology: replicas, primary and sentinels talk to each other; CLIENT PAUSE holds writes.
func (sentinelTopology) Traits() Traits {
	return Traits{Peers: true, WriteHolds: true, Discovers: true, Server: "redis-server", DiskWaitsWith: PersistAOFAlways, Keys: redisKeys, Cleanup: redisCleanup}
}

// Size implements Topology: one primary, --replicas replicas (2) and --sentinels sentinels (3).
func (t sentinelTopology) Size(s *Size) error {
	switch {
	case s.External && (s.Replicas != 0 || s.Sentinels != 0):
		return fmt.Errorf("--replicas and --sentinels size the sentinel system lockpick starts; on --backend external the sentinels report them: drop them")
	case s.Nodes != 0:
		return fmt.Errorf("--nodes counts the masters of redis-masters, and --lock %s runs on redis-sentinel (one primary): drop --nodes (use --replicas and --sentinels)", s.Lock)
	case s.Replicas < 0 || s.Sentinels < 0:
		return fmt.Errorf("--replicas and --sentinels must be at least 1, got %d and %d", s.Replicas, s.Sentinels)
	}
	if s.Replicas == 0 {
		s.Replicas = 2
	}
	if s.Sentinels == 0 {
		s.Sentinels = 3
	}
	if _, err := t.Layout(Config{Sentinel: SentinelConfig{Replicas: s.Replicas, Sentinels: s.Sentinels}}); err != nil {
		return fmt.Errorf("--replicas %d --sentinels %d: %w", s.Replicas, s.Sentinels, err)
	}
	return nil
}

func (sentinelTopology) persistence(cfg Config) Persistence {
	return persistence(cfg.Persistence)
}

// start places the nodes (their peer paths: links on loopback, the run's network in containers),
// starts the data nodes, waits until every replica is in sync, then starts the sentinels.
func (sentinelTopology) start(ctx context.Context, b *bed, layout []Node) (_ System, err error) {
	sc, err := b.cfg.Sentinel.resolve()
	if err != nil {
		b.backend.Close()
		return nil, err
	}
	s := &sentinelSys{cfg: sc, backend: b.backend, links: links.New(), nodes: layout,
		known: map[string]string{}, byKnown: map[string]string{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if b.loopback {
		err = s.placeLoopback(ctx, b)
	} else {
		err = s.placeContainers(ctx, b)
	}
	if err != nil {
		return nil, err
	}
	if err := s.startAll(ctx); err != nil {
		return nil, fmt.Errorf("start redis-sentinel%s: %w", b.where(), err)
	}
	s.watch = newWatcher(s, b.cfg.Logger)
	return s, nil
}

// placeLoopback declares the nodes as local processes, each known by the address of the router,
// which sends each connection through the link of its source.
func (s *sentinelSys) placeLoopback(ctx context.Context, b *bed) (err error) {
	s.router = links.NewRouter(s.links, b.cfg.Logger)
	reserved, err := ReservePorts(len(s.nodes))
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			for _, l := range reserved {
				l.Close() // a second close of a port already handed on is harmless
			}
		}
	}()
	for i := range s.nodes {
		s.nodes[i].Addr = reserved[i].Addr().String()
	}
	if err := s.addLinks(b.cfg.Groups); err != nil {
		return err
	}
	for i, n := range s.nodes {
		s.router.Source(n.Name, sourceIP(n, i))
		known, err := s.router.Listen(n.Name, "127.0.0.1:0")
		if err != nil {
			return err
		}
		s.known[n.Name], s.byKnown[known] = known, n.Name
	}
	for i, n := range s.nodes {
		if err := s.declare(ctx, b.t, b.programs[0], b.dir, n, sourceIP(n, i), b.t.persist, reserved[i]); err != nil {
			return err
		}
	}
	return nil
}

// sourceIP is the address node i binds its outgoing connections to, which tells the router who is
// calling: 127.0.1.k for the k-th data node, 127.0.2.k for the k-th sentinel.
func sourceIP(n Node, i int) string {
	if n.Role == RoleSentinel {
		return fmt.Sprintf("127.0.2.%d", i+1)
	}
	return fmt.Sprintf("127.0.1.%d", i+1)
}

// addLinks puts a link on every path: each client group to each node; each data node to each other
// (a replica may replicate from any of them after a failover); each sentinel to every other node.
func (s *sentinelSys) addLinks(groups []string) error {
	for _, to := range s.nodes {
		for _, g := range groups {
			if _, err := s.links.Add(g, to.Name, to.Addr); err != nil {
				return err
			}
		}
		for _, from := range s.nodes {
			if from.Name == to.Name || (from.Role != RoleSentinel && to.Role == RoleSentinel) {
				continue
			}
			if _, err := s.links.Add(from.Name, to.Name, to.Addr); err != nil {
				return err
			}
		}
	}
	return nil
}

// declare writes a node's configuration file and declares its process to the backend.
func (s *sentinelSys) declare(ctx context.Context, lb *table, bin, dir string, n Node, source string, persist Persistence, reserved net.Listener) error {
	nd := filepath.Join(dir, n.Name)
	if err := os.MkdirAll(nd, 0o755); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	_, port, _ := net.SplitHostPort(n.Addr)
	_, knownPort, _ := net.SplitHostPort(s.known[n.Name])
	_, primaryPort, _ := net.SplitHostPort(s.known[s.nodes[0].Name])
	conf, body, args := s.conf(nd, n, persist, confAt{port: port, bind: "127.0.0.1", primary: "127.0.0.1 " + primaryPort,
		announce: knownPort, source: source})
	if err := os.WriteFile(conf, body, 0o644); err != nil {
		return fmt.Errorf("node %s: write %s: %w", n.Name, conf, err)
	}
	var data []string
	if n.Role != RoleSentinel {
		data = redisData(nd)
	}
	_, err := lb.add(ctx, nodeSpec{name: n.Name, dir: nd, cmd: append([]string{bin}, args...), addr: n.Addr, data: data,
		reserved: reserved, shim: true})
	return err
}

// confAt is where a node's configuration puts it: its port and bind address, the primary's
// "ip port" as the servers know it and, on loopback, the port the node announces (its router
// address's) and the source address of its connections.
type confAt struct {
	port, bind, primary string
	announce, source    string
}

// conf is a node's configuration file (its path and content) and the server's arguments.
func (s *sentinelSys) conf(nd string, n Node, persist Persistence, at confAt) (conf string, body []byte, args []string) {
	lines := []string{
		"port " + at.port,
		"bind " + at.bind,
		"protected-mode no",
		"daemonize no",
		"dir " + nd,
		"logfile " + filepath.Join(nd, "redis.log"),
	}
	if at.source != "" {
		// Every connection this node opens leaves from its own address: the router tells by it
		// which link the connection takes.
		lines = append(lines, "bind-source-addr "+at.source)
	}
	if n.Role == RoleSentinel {
		conf = filepath.Join(nd, "sentinel.conf")
		return conf, confBody(append(lines, s.sentinelLines(at)...)), []string{conf, "--sentinel"}
	}
	conf = filepath.Join(nd, "redis.conf")
	lines = append(lines, s.dataLines(n, persist, at)...)
	return conf, confBody(lines), []string{conf}
}

func confBody(lines []string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

// sentinelLines configure a sentinel: what it monitors, and how fast it fails over.
func (s *sentinelSys) sentinelLines(at confAt) []string {
	var lines []string
	if at.announce != "" {
		lines = append(lines, "sentinel announce-ip 127.0.0.1", "sentinel announce-port "+at.announce)
	}
	return append(lines,
		"sentinel resolve-hostnames no",
		fmt.Sprintf("sentinel monitor %s %s %d", MasterName, at.primary, s.cfg.Quorum),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", MasterName, s.cfg.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", MasterName, s.cfg.FailoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", MasterName),
	)
}

// dataLines configure a primary or a replica.
func (s *sentinelSys) dataLines(n Node, persist Persistence, at confAt) []string {
	lines := []string{`save ""`, "appendfilename appendonly.aof"}
	if at.announce != "" {
		// A replica is known by its router address, so the master lists it, and the sentinels
		// reach it, through links.
		lines = append(lines, "replica-announce-ip 127.0.0.1", "replica-announce-port "+at.announce)
	}
	lines = append(lines,
		// The first sync and every resync start at once, not after Redis's 5 s default wait.
		"repl-diskless-sync yes",
		"repl-diskless-sync-delay 0",
		fmt.Sprintf("min-replicas-to-write %d", s.cfg.MinReplicasToWrite),
		fmt.Sprintf("min-replicas-max-lag %d", int(s.cfg.MinReplicasMaxLag/time.Second)),
	)
	lines = append(lines, persistLines(persist)...)
	if n.Role == RoleReplica {
		lines = append(lines, "replicaof "+at.primary)
	}
	return lines
}

func persistLines(p Persistence) []string {
	switch p {
	case PersistAOFEverysec:
		return []string{"appendonly yes", "appendfsync everysec"}
	case PersistAOFAlways:
		return []string{"appendonly yes", "appendfsync always"}
	}
	return []string{"appendonly no"}
}

// startAll starts the data nodes, waits until every replica is in sync, then starts the sentinels
// and waits until each knows every replica and every other sentinel.
func (s *sentinelSys) startAll(ctx context.Context) error {
	for _, n := range s.nodes {
		if n.Role != RoleSentinel {
			if err := s.backend.Start(ctx, n.Name); err != nil {
				return err
			}
		}
	}
	if err := s.waitReplicasOnline(ctx, 15*time.Second); err != nil {
		return err
	}
	for _, n := range s.nodes {
		if n.Role == RoleSentinel {
			if err := s.backend.Start(ctx, n.Name); err != nil {
				return err
			}
		}
	}
	return s.waitSentinelsAgree(ctx, 20*time.Second)
}

func (s *sentinelSys) waitReplicasOnline(ctx context.Context, wait time.Duration) error {
	admin := AdminClient(s.nodes[0].Addr)
	defer admin.Close()
	var last string
	return poll(ctx, wait, func(ctx context.Context) (bool, error) {
		info, err := admin.Info(ctx, "replication").Result()
		if err != nil {
			last = err.Error()
			return false, nil
		}
		online := strings.Count(info, "state=online")
		last = fmt.Sprintf("%d of %d replicas online", online, s.cfg.Replicas)
		return online == s.cfg.Replicas, nil
	}, func() string { return "the replicas did not sync with the primary: " + last })
}

func (s *sentinelSys) waitSentinelsAgree(ctx context.Context, wait time.Duration) error {
	var last string
	return poll(ctx, wait, func(ctx context.Context) (bool, error) {
		for _, n := range s.nodes {
			if n.Role != RoleSentinel {
				continue
			}
			m, err := sentinelMaster(ctx, n.Addr)
			if err != nil {
				last = fmt.Sprintf("%s: %v", n.Name, err)
				return false, nil
			}
			if m["num-slaves"] != strconv.Itoa(s.cfg.Replicas) || m["num-other-sentinels"] != strconv.Itoa(s.cfg.Sentinels-1) {
				last = fmt.Sprintf("%s knows %s replicas and %s other sentinels", n.Name, m["num-slaves"], m["num-other-sentinels"])
				return false, nil
			}
		}
		return true, nil
	}, func() string { return "the sentinels did not find each other and the replicas: " + last })
}

// poll calls check every 50ms until it reports done, fails, or wait passes.
func poll(ctx context.Context, wait time.Duration, check func(context.Context) (bool, error), why func() string) error {
	deadline := time.Now().Add(wait)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		done, err := check(cctx)
		cancel()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (after %v)", why(), wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Name implements System.
func (s *sentinelSys) Name() string { return "redis-sentinel" }

// Nodes implements System.
func (s *sentinelSys) Nodes() []Node { return append([]Node(nil), s.nodes...) }

// Roles implements System: the primary is the one the sentinels last agreed on (the highest
// configuration epoch any of them reports), every other data node a replica.
func (s *sentinelSys) Roles() map[string]Role { return s.watch.roles() }

// Endpoints implements System.
func (s *sentinelSys) Endpoints(group string) ([]Endpoint, error) {
	return groupEndpoints(s.links, group, s.nodes, func(n Node) string { return s.known[n.Name] })
}

// Links implements System.
func (s *sentinelSys) Links() *links.Set { return s.links }

// Backend implements System.
func (s *sentinelSys) Backend() Backend { return s.backend }

// Watch implements System.
func (s *sentinelSys) Watch(f func(Event)) { s.watch.subscribe(f) }

// HoldWrites implements System.
func (s *sentinelSys) HoldWrites(ctx context.Context, node string, max time.Duration, f func(context.Context) error) error {
	return s.HoldWritesStepping(ctx, node, max, withoutSteps(f))
}

// HoldWritesStepping is HoldWrites whose f may also let the writes held so far run and hold again
// (the failover nemesis's stall, aimed between a release and the next grant).
func (s *sentinelSys) HoldWritesStepping(ctx context.Context, node string, max time.Duration, f func(ctx context.Context, step func(context.Context) error) error) error {
	for _, n := range s.nodes {
		if n.Name == node && n.Data {
			return holdWritesStepping(ctx, s.holds.get(n.Addr), n.Addr, max, f)
		}
	}
	return fmt.Errorf("node %s stores no data: no writes to hold", node)
}

// Ping implements System.
func (s *sentinelSys) Ping(ctx context.Context, node string) error {
	for _, n := range s.nodes {
		if n.Name == node {
			return PingOnce(ctx, n.Addr)
		}
	}
	return fmt.Errorf("no node %q", node)
}

// Known returns the address the servers know node by (the router's), for tests and reports.
func (s *sentinelSys) Known(node string) string { return s.known[node] }

// nodeAt names the node whose known address is ip:port, or returns the address itself.
func (s *sentinelSys) nodeAt(ip, port string) string {
	addr := net.JoinHostPort(ip, port)
	if n, ok := s.byKnown[addr]; ok {
		return n
	}
	return addr
}

// Close implements System.
func (s *sentinelSys) Close() error {
	if s.watch != nil {
		s.watch.close()
	}
	err := s.backend.Close()
	s.holds.close()
	if s.router != nil {
		s.router.Close()
	}
	s.links.Close()
	return err
}

// sentinelPort is the port of a sentinel in its container.
const sentinelPort = 26379

// placeContainers places the primary, its replicas and the sentinels each in a container (a pod)
// of its own, talking to each other over their containers' addresses, which are also the addresses
// the servers announce (a sentinel's "where is the master" answer, a replica's address in the
// primary's list). Clients reach every node through their group's link, and map the announced
// address to it by Endpoint.Known. A path between servers is cut by rules in the caller's
// namespace (PeerCutter), not by a link.
func (s *sentinelSys) placeContainers(ctx context.Context, b *bed) error {
	bin := b.programs[0]
	specs := make([]nodeSpec, len(s.nodes))
	for i, n := range s.nodes {
		port := redisPort
		if n.Role == RoleSentinel {
			port = sentinelPort
		}
		if b.ssh != nil {
			port = b.ssh.place(n.Name).port // several nodes may share a host
		}
		nd := b.nodeDir(n.Name)
		specs[i] = nodeSpec{name: n.Name, dir: nd, idle: redisIdle(bin), port: port, peerPort: port, shim: true}
		if n.Data {
			specs[i].data = redisData(nd)
		}
	}
	if err := b.place(ctx, specs); err != nil {
		return fmt.Errorf("start redis-sentinel%s: %w", b.where(), err)
	}
	for i, n := range s.nodes {
		known := b.peerAddr(n.Name, specs[i].port)
		s.known[n.Name], s.byKnown[known] = known, n.Name
		s.nodes[i].Addr = b.t.addrOf(n.Name)
	}
	for _, n := range s.nodes {
		conf, body, args := s.dockerConf(b.nodeDir(n.Name), n, b.t.persist)
		if err := b.writeFile(ctx, n.Name, conf, body); err != nil {
			return err
		}
		b.t.setCmd(n.Name, append([]string{bin}, args...), nil)
		for _, g := range b.cfg.Groups {
			if _, err := s.links.Add(g, n.Name, n.Addr); err != nil {
				return err
			}
		}
	}
	return nil
}

// dockerConf is a node's configuration in a container. Each server listens on every interface of
// its container and is known by its container's address (s.known), so nothing needs announcing:
// Sentinel monitors the primary's address, replicas replicate from it, and the sentinels find each
// other by the addresses their hellos come from.
func (s *sentinelSys) dockerConf(nd string, n Node, persist Persistence) (conf string, body []byte, args []string) {
	_, port, _ := net.SplitHostPort(s.known[n.Name])
	pip, pport, _ := net.SplitHostPort(s.known[s.nodes[0].Name])
	return s.conf(nd, n, persist, confAt{port: port, bind: "0.0.0.0", primary: pip + " " + pport})
}
