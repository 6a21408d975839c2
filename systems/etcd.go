package systems

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockpick-dev/lockpick/links"
)

// Roles of an etcd cluster.
const (
	// RoleLeader is the raft leader of an etcd cluster.
	RoleLeader Role = "leader"
	// RoleFollower is every other etcd member.
	RoleFollower Role = "follower"
)

// EtcdElectionTimeout is the members' election timeout (etcd's default, which lockpick keeps). A
// member that becomes leader gives every lease its TTL again plus this much (the lessor's Promote),
// so a lease can outlive its last keepalive by the TTL and the election timeout.
const EtcdElectionTimeout = time.Second

// EtcdConfig is the size and the server program of the etcd system.
type EtcdConfig struct {
	// Members is the number of members; zero means 3.
	Members int
	// Server is the etcd program (see FindEtcd).
	Server string
}

func (c EtcdConfig) resolve() (EtcdConfig, error) {
	if c.Members == 0 {
		c.Members = 3
	}
	if c.Members < 1 {
		return c, fmt.Errorf("system etcd needs at least one member, got %d", c.Members)
	}
	return c, nil
}

func (c EtcdConfig) layout() []Node {
	nodes := make([]Node, c.Members)
	for i := range nodes {
		// Every member starts as a follower; the first role report names the leader.
		nodes[i] = Node{Name: fmt.Sprintf("e%d", i+1), Role: RoleFollower, Data: true}
	}
	return nodes
}

// peerHost is the address members know each other's peer ports by: 192.0.2.1 (TEST-NET-1, RFC 5737)
// is never routed, and is not a loopback address, so Go's HTTP client in each member sends every peer
// request through the member's HTTP_PROXY, which is the member's links.Forwarder, and a request that
// did not would fail rather than go around the links. The port tells the forwarder which member is
// called. (A host name would need resolving, which etcd does when a member joins.)
const peerHost = "192.0.2.1"

// etcdSys is the etcd system: members as local child processes, each with its own data directory.
// Clients reach each member's client port through a link per client group. Every peer request of a
// member leaves through the member's Forwarder, which sends it on through the link from that member
// to the callee, so a partition can cut any pair of members, either way.
type etcdSys struct {
	cfg     EtcdConfig
	backend nodeBackend
	links   *links.Set
	fwd     []*links.Forwarder
	roles   *leaderWatch

	nodes []Node
	peer  map[string]string // member -> its own peer address
	// known is, on the docker backend, the address the other members call each member by (its
	// peer address); empty on the local backend, where that is peerHost and the member's port.
	known  map[string]string
	admins map[string]*clientv3.Client
	log    *slog.Logger
}

// etcdReadyLog is what a member logs once it serves.
var etcdReadyLog = logLine{file: "etcd.log", text: "serving client traffic"}

// etcdTopology is etcd.
type etcdTopology struct{}

// Name implements Topology.
func (etcdTopology) Name() string { return "etcd" }

// Layout implements Topology: members e1..eN (default 3), each a follower until the first role
// report names the leader.
func (etcdTopology) Layout(cfg Config) ([]Node, error) {
	ec, err := cfg.Etcd.resolve()
	if err != nil {
		return nil, err
	}
	return ec.layout(), nil
}

// Programs implements Topology: the etcd program, and sleep, which a member's container idles in
// (the member is exec'd in it), when the host has it.
func (etcdTopology) Programs(cfg Config) ([]string, error) {
	if cfg.Etcd.Server == "" {
		return nil, errors.New("system etcd: no etcd program given (see --etcd-server)")
	}
	progs := []string{cfg.Etcd.Server}
	if sleep, err := exec.LookPath("sleep"); err == nil {
		progs = append(progs, sleep)
	}
	return progs, nil
}

// errEtcdClock is why the clock shim cannot move a member's clock.
var errEtcdClock = errors.New("etcd members are Go programs that read the time without libc, so the clock shim cannot move their clocks")

// Clocks implements Topology.
func (etcdTopology) Clocks() error { return errEtcdClock }

// Traits implements Topology: members talk raft to each other; a member cannot hold writes back.
func (etcdTopology) Traits() Traits {
	return Traits{
		Peers: true, Leader: true, Server: "etcd-server", WholeSecondLeases: true, LeaseGrace: EtcdElectionTimeout,
		Keys:    "the lock's requests (a lease per session with its keepalives, a transaction creating KEY/LEASE, range reads under KEY/, the delete of its own KEY/LEASE) touch only keys under these, plus one read of the key lockpick-warm; leases of sessions cut short expire after their TTL",
		Cleanup: "one delete of the range with prefix %s; lockpick never compacts, defragments, changes members or alarms, and never kills, pauses or restarts a member",
	}
}

// Size implements Topology: --nodes members, 1 to 9 (3).
func (etcdTopology) Size(s *Size) error {
	switch {
	case s.Replicas != 0 || s.Sentinels != 0:
		return fmt.Errorf("--replicas and --sentinels size redis-sentinel, and --lock %s runs on etcd: drop them (--nodes sets the members)", s.Lock)
	case s.Nodes < 0 || s.Nodes > 9:
		return fmt.Errorf("--nodes %d: an etcd cluster here has 1 to 9 members: use --nodes 3 (the default) or 5", s.Nodes)
	case s.Nodes == 0:
		s.Nodes = 3
	}
	return nil
}

// persistence implements Topology: a member always keeps its data directory; a start without it
// is StartEmpty's (etcdBackend), which replaces the member.
func (etcdTopology) persistence(Config) Persistence { return "" }

// start places the members (their peer paths: links through each member's forwarder on loopback,
// the run's network in containers), starts them one by one (a member waits for its peers before it
// serves, so the readiness each start waits for is the member's answer on its client port) and
// waits until they agree on a leader.
func (etcdTopology) start(ctx context.Context, b *bed, layout []Node) (_ System, err error) {
	ec, err := b.cfg.Etcd.resolve()
	if err != nil {
		b.backend.Close()
		return nil, err
	}
	s := &etcdSys{cfg: ec, backend: b.backend, links: links.New(), nodes: layout, log: b.cfg.Logger,
		peer: map[string]string{}, known: map[string]string{}, admins: map[string]*clientv3.Client{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	healthy := 20 * time.Second
	if b.loopback {
		s.known = nil // the members know each other by peerHost
		err = s.placeLoopback(ctx, b)
	} else {
		healthy = 30 * time.Second // a container is slower to come up
		err = s.placeContainers(ctx, b)
	}
	if err != nil {
		return nil, err
	}
	if err := s.startMembers(ctx, healthy); err != nil {
		return nil, fmt.Errorf("start etcd%s: %w", b.where(), err)
	}
	return s, nil
}

// startMembers starts the members one by one, opens the harness's client of each, and waits until
// they agree on a leader.
func (s *etcdSys) startMembers(ctx context.Context, healthy time.Duration) error {
	for _, n := range s.nodes {
		if err := s.backend.Start(ctx, n.Name); err != nil {
			return err
		}
		c, err := adminClient(n.Addr)
		if err != nil {
			return err
		}
		s.admins[n.Name] = c
	}
	s.roles = watchLeader("etcd", s.nodes, etcdRolesEvery, s.leaderNow, s.log)
	return s.waitHealthy(ctx, healthy)
}

// placeLoopback declares the members as local processes; every peer request of a member leaves
// through the member's Forwarder and the link from that member to the callee.
func (s *etcdSys) placeLoopback(ctx context.Context, b *bed) error {
	reserved, err := ReservePorts(2 * len(s.nodes))
	if err != nil {
		return err
	}
	defer func() {
		for _, l := range reserved {
			l.Close() // etcd binds its ports itself; a second close is harmless
		}
	}()
	known := map[string]string{} // the host:port a member's peers call it by -> member
	var initial []string
	for i := range s.nodes {
		n := &s.nodes[i]
		n.Addr = reserved[2*i].Addr().String()
		s.peer[n.Name] = reserved[2*i+1].Addr().String()
		_, port, _ := net.SplitHostPort(s.peer[n.Name])
		known[net.JoinHostPort(peerHost, port)] = n.Name
		initial = append(initial, n.Name+"=http://"+net.JoinHostPort(peerHost, port))
	}
	if err := s.addLinks(b.cfg.Groups); err != nil {
		return err
	}
	for _, n := range s.nodes {
		f, err := links.NewForwarder(s.links, n.Name, s.peer[n.Name], known, b.cfg.Logger)
		if err != nil {
			return err
		}
		s.fwd = append(s.fwd, f)
		if err := s.declare(ctx, b.t, b.dir, n, strings.Join(initial, ","), f.Addr()); err != nil {
			return err
		}
	}
	return nil
}

// addLinks puts a link on every path: each client group to each member's client port, and each
// member to each other member's peer port.
func (s *etcdSys) addLinks(groups []string) error {
	for _, to := range s.nodes {
		for _, g := range groups {
			if _, err := s.links.Add(g, to.Name, to.Addr); err != nil {
				return err
			}
		}
		for _, from := range s.nodes {
			if from.Name != to.Name {
				if _, err := s.links.Add(from.Name, to.Name, s.peer[to.Name]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// declare declares a member's process to the backend: its command line, its data directory (which
// a start without data removes) and its peer proxy.
func (s *etcdSys) declare(ctx context.Context, lb *table, dir string, n Node, initial, proxy string) error {
	nd := filepath.Join(dir, n.Name)
	_, peerPort, _ := net.SplitHostPort(s.peer[n.Name])
	data := filepath.Join(nd, "data")
	args := []string{s.cfg.Server,
		"--name", n.Name,
		"--data-dir", data,
		"--listen-client-urls", "http://" + n.Addr,
		"--advertise-client-urls", "http://" + n.Addr,
		"--listen-peer-urls", "http://" + s.peer[n.Name],
		"--initial-advertise-peer-urls", "http://" + net.JoinHostPort(peerHost, peerPort),
		"--initial-cluster", initial,
		// A member that starts again with its data rejoins by its WAL; one that starts again
		// without (wipedArgs, after StartEmpty replaced it under a new id) joins the existing
		// cluster with an empty log and catches up from the leader.
		"--initial-cluster-state", "new",
		"--initial-cluster-token", "lockpick",
		"--logger", "zap",
		"--log-outputs", filepath.Join(nd, "etcd.log"),
	}
	// NO_PROXY empty: nothing is exempt; the client port's own gateway dials a loopback address,
	// which Go never proxies.
	env := []string{"HTTP_PROXY=http://" + proxy, "http_proxy=http://" + proxy, "NO_PROXY=", "no_proxy=",
		"HTTPS_PROXY=", "https_proxy="}
	wiped := slices.Clone(args)
	wiped[slices.Index(wiped, "new")] = "existing"
	if err := os.MkdirAll(nd, 0o755); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	name := n.Name
	ready := func(ctx context.Context) error { return s.serves(ctx, name) }
	_, err := lb.add(ctx, nodeSpec{name: n.Name, dir: nd, cmd: args, wipedCmd: wiped, addr: n.Addr, data: []string{data}, env: env,
		ready: ready, readyLog: etcdReadyLog})
	return err
}

// serves reports whether a member serves. A member answers its clients only once its cluster has a
// leader, which needs a majority of the members running: while fewer run, a member that listens is as
// ready as it can be (its start is waited for by the system, or by the start of the others).
func (s *etcdSys) serves(ctx context.Context, name string) error {
	addr := s.nodeAddr(name)
	return quorumReady(ctx, s.backend, s.nodes, addr, func() error { return etcdAnswers(ctx, addr) })
}

// etcdAnswers asks a member's client port for its version, on a fresh connection.
func etcdAnswers(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/version", nil)
	if err != nil {
		return err
	}
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /version: %s", resp.Status)
	}
	return nil
}

// adminClient is the harness's own client of one member, over the member's own address.
func adminClient(addr string) (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{addr}, DialTimeout: time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd admin client of %s: %w", addr, err)
	}
	return c, nil
}

// waitHealthy waits until every member answers a status with the same leader.
func (s *etcdSys) waitHealthy(ctx context.Context, wait time.Duration) error {
	var last string
	return poll(ctx, wait, func(ctx context.Context) (bool, error) {
		var leader uint64
		for _, n := range s.nodes {
			st, err := s.status(ctx, n.Name)
			if err != nil {
				last = fmt.Sprintf("member %s: %v", n.Name, err)
				return false, nil
			}
			if st.Leader == 0 || (leader != 0 && st.Leader != leader) {
				last = fmt.Sprintf("member %s sees leader %x", n.Name, st.Leader)
				return false, nil
			}
			leader = st.Leader
		}
		return true, nil
	}, func() string { return "the etcd cluster did not agree on a leader: " + last })
}

func (s *etcdSys) status(ctx context.Context, name string) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	return s.admins[name].Status(ctx, s.nodeAddr(name))
}

// knownPeer is the host:port the members know name's peer port by.
func (s *etcdSys) knownPeer(name string) string {
	if k, ok := s.known[name]; ok {
		return k
	}
	_, port, _ := net.SplitHostPort(s.peer[name])
	return net.JoinHostPort(peerHost, port)
}

func (s *etcdSys) nodeAddr(name string) string {
	for _, n := range s.nodes {
		if n.Name == name {
			return n.Addr
		}
	}
	return ""
}

// Name implements System.
func (s *etcdSys) Name() string { return "etcd" }

// Nodes implements System.
func (s *etcdSys) Nodes() []Node { return append([]Node(nil), s.nodes...) }

// Roles implements System.
func (s *etcdSys) Roles() map[string]Role { return s.roles.current() }

// Endpoints implements System.
func (s *etcdSys) Endpoints(group string) ([]Endpoint, error) {
	return groupEndpoints(s.links, group, s.nodes, func(n Node) string { return n.Addr })
}

// Links implements System.
func (s *etcdSys) Links() *links.Set { return s.links }

// Backend implements System.
func (s *etcdSys) Backend() Backend {
	if d, ok := s.backend.(*docker); ok {
		return etcdSlowDocker{etcdDocker{etcdBackend{s.backend, s}, d, d}, d}
	}
	if r, ok := s.backend.(*dockerRemote); ok {
		return etcdSlowDocker{etcdDocker{etcdBackend{s.backend, s}, r, r}, r}
	}
	if r, ok := s.backend.(*sshRunner); ok {
		return etcdSlowDocker{etcdDocker{etcdBackend{s.backend, s}, r, r}, r}
	}
	return etcdBackend{s.backend, s}
}

// Watch implements System.
func (s *etcdSys) Watch(f func(Event)) { s.roles.subscribe(f) }

// HoldWrites implements System: etcd has no way to hold writes back on one member.
func (s *etcdSys) HoldWrites(context.Context, string, time.Duration, func(context.Context) error) error {
	return errors.New("etcd members cannot hold writes back")
}

// Ping implements System: the member answers a status request.
func (s *etcdSys) Ping(ctx context.Context, node string) error {
	c, ok := s.admins[node]
	if !ok {
		return fmt.Errorf("no member %q", node)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := c.Status(ctx, s.nodeAddr(node))
	return err
}

// Close implements System.
func (s *etcdSys) Close() error {
	if s.roles != nil {
		s.roles.close()
	}
	for _, c := range s.admins {
		c.Close()
	}
	for _, f := range s.fwd {
		f.Close()
	}
	s.links.Close()
	return s.backend.Close()
}

// etcdBackend is the backend of etcd members (local or docker): Go programs read the time without libc, so the
// clock shim cannot move their clocks.
type etcdBackend struct {
	nodeBackend
	sys *etcdSys
}

// StartEmpty implements Backend as an operator replaces a member whose disk was lost: etcd refuses a
// member that kept its id and lost its log (it panics: "Was the raft log corrupted, truncated, or
// lost?"), so the member is removed from the cluster, added again under a new id, and started
// without data to join the existing cluster and catch up from the leader. It needs a live majority.
func (b etcdBackend) StartEmpty(ctx context.Context, node string) error {
	if b.Running(node) {
		return fmt.Errorf("node %s is already running", node)
	}
	peerURL := "http://" + b.sys.knownPeer(node)
	// etcd adds a member only when its active members have been connected for a while (5 s): a
	// member restarted just before makes it answer "unhealthy cluster" until then.
	var lastErr error
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for _, other := range b.sys.nodes {
			if other.Name == node || !b.Running(other.Name) {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			lastErr = replaceMember(cctx, b.sys.admins[other.Name], peerURL)
			cancel()
			if lastErr == nil {
				return b.nodeBackend.StartEmpty(ctx, node)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("replace etcd member %s (a start without data): %w", node, lastErr)
}

// replaceMember removes the member with peerURL and adds a new one with the same peer URL.
func replaceMember(ctx context.Context, c *clientv3.Client, peerURL string) error {
	ms, err := c.MemberList(ctx)
	if err != nil {
		return err
	}
	for _, m := range ms.Members {
		if slices.Contains(m.PeerURLs, peerURL) {
			if _, err := c.MemberRemove(ctx, m.ID); err != nil {
				return fmt.Errorf("member remove: %w", err)
			}
		}
	}
	if _, err := c.MemberAdd(ctx, []string{peerURL}); err != nil {
		return fmt.Errorf("member add: %w", err)
	}
	return nil
}

// ClockShim implements Backend.
func (etcdBackend) ClockShim() bool { return false }

// SetClockOffset implements Backend.
func (etcdBackend) SetClockOffset(node string, _ time.Duration) error {
	return fmt.Errorf("node %s is an etcd member, a Go program that reads the time without libc: the clock shim cannot move its clock", node)
}

// ClockOffset implements Backend.
func (etcdBackend) ClockOffset(string) (time.Duration, error) { return 0, nil }

// Ports of an etcd member in its container.
const (
	etcdClientPort = 2379
	etcdPeerPort   = 2380
)

// placeContainers places each member in a container (a pod) of its own, or on a host of the ssh
// backend, called by its peers at its container's (host's) address (its peer URL), so raft traffic
// crosses the containers' (hosts') interfaces with no proxy of the harness in its way; a path
// between members is cut by PeerCutter. Clients reach each member's client port through their
// group's link. A container's own process is sleep (the member is exec'd in it, as the redis nodes
// are), so the image is the etcd program, sleep and their libraries. On a host a member listens on
// its place's port and the peer port above it (sshRunner.peerPort): a host may hold several.
func (s *etcdSys) placeContainers(ctx context.Context, b *bed) error {
	if b.ssh == nil && len(b.programs) < 2 {
		return fmt.Errorf("etcd on docker: the containers idle in sleep, and the host has none: install coreutils")
	}
	specs := make([]nodeSpec, len(s.nodes))
	for i, n := range s.nodes {
		name, nd := n.Name, b.nodeDir(n.Name)
		specs[i] = nodeSpec{name: name, dir: nd, port: etcdClientPort, peerPort: etcdPeerPort, data: []string{path.Join(nd, "data")},
			ready: func(ctx context.Context) error { return s.serves(ctx, name) }, readyLog: etcdReadyLog}
		if b.ssh != nil {
			specs[i].port, specs[i].peerPort = b.ssh.place(name).port, b.ssh.peerPort(name)
		} else {
			specs[i].idle = []string{b.programs[1], "infinity"}
		}
	}
	if err := b.place(ctx, specs); err != nil {
		return fmt.Errorf("start etcd%s: %w", b.where(), err)
	}
	var initial []string
	for i, n := range s.nodes {
		s.peer[n.Name] = b.peerAddr(n.Name, specs[i].peerPort)
		s.known[n.Name] = s.peer[n.Name]
		s.nodes[i].Addr = b.t.addrOf(n.Name)
		initial = append(initial, n.Name+"=http://"+s.peer[n.Name])
	}
	for i, n := range s.nodes {
		args, wiped := s.dockerArgs(b.programs[0], b.nodeDir(n.Name), n, strings.Join(initial, ","), specs[i].port, specs[i].peerPort)
		b.t.setCmd(n.Name, args, wiped)
		for _, g := range b.cfg.Groups {
			if _, err := s.links.Add(g, n.Name, n.Addr); err != nil {
				return err
			}
		}
	}
	return nil
}

// dockerArgs is a member's command line in its container, and the one it starts with after losing
// its data (it joins the existing cluster, as on the local backend).
func (s *etcdSys) dockerArgs(server, nd string, n Node, initial string, port, peerPort int) (args, wiped []string) {
	args = []string{server,
		"--name", n.Name,
		"--data-dir", path.Join(nd, "data"),
		"--listen-client-urls", "http://0.0.0.0:" + strconv.Itoa(port),
		"--advertise-client-urls", "http://" + n.Addr,
		"--listen-peer-urls", "http://0.0.0.0:" + strconv.Itoa(peerPort),
		"--initial-advertise-peer-urls", "http://" + s.peer[n.Name],
		"--initial-cluster", initial,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", "lockpick",
		"--logger", "zap",
		"--log-outputs", path.Join(nd, "etcd.log"),
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
