package systems

// The zookeeper family: an ensemble of Debian's ZooKeeper 3.8 members, each a JVM run directly on
// a generated zoo.cfg and myid under the run's directory. Clients reach each member through a link
// per client group; each member reaches each other member (quorum and election) through the link
// from it to that member, whose upstream is the callee's peer demux (zkdemux.go).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/links"
)

// zkJars are Debian's jars a member's JVM needs (under /usr/share/java).
func zkJars() []string {
	return []string{"zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-simple", "metrics-core", "snappy-java", "commons-cli", "commons-io", "netty-handler", "netty-transport", "netty-common", "netty-buffer", "netty-codec", "netty-resolver", "netty-transport-native-epoll", "netty-transport-native-unix-common"}
}

// zkStartWait bounds a member's start until it serves: three JVMs electing a leader through their
// peer links took over 30 s at load 30 to 40 on 2 cores (a card's two runs beside other work). The
// bound only ends a hang.
const zkStartWait = 90 * time.Second

type zkTopology struct{}

func (zkTopology) Name() string { return "zookeeper" }

func (zkTopology) Layout(cfg Config) ([]Node, error) {
	n := cfg.Nodes
	if n == 0 {
		n = 3
	}
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = Node{Name: fmt.Sprintf("z%d", i+1), Role: RoleFollower, Data: true}
	}
	return nodes, nil
}

func (zkTopology) Programs(Config) ([]string, error) {
	j, err := exec.LookPath("java")
	if err != nil {
		return nil, err
	}
	return []string{j}, nil
}

// errZKClock is why the clock shim is not offered on the members.
var errZKClock = errors.New("zookeeper members are JVMs whose clock reads the shim is not known to catch (untested), so clock faults are not offered")

// Clocks implements Topology.
func (zkTopology) Clocks() error { return errZKClock }

func (zkTopology) Traits() Traits {
	// Sessions of 3 s: go-zk waits 2 s for a reply (2/3 of it); at 1.5 s a load of 40 on two
	// cores stalled the members past 1 s, every session ended, and rows granted nothing.
	return Traits{Peers: true, Leader: true, SessionTTL: 3 * time.Second,
		NotOn: map[string]string{
			BackendDocker:   "docker: system zookeeper runs local members only (its JVM and jars are not in the offline node image); use --backend local",
			BackendExternal: "external: system zookeeper runs local members only for now; use --backend local",
			BackendSSH:      "ssh: system zookeeper runs local members only for now; use --backend local",
		},
		Keys:    "the lock's requests (a session, sequential ephemeral nodes under the lock's path, reads of its children) touch only znodes under these",
		Cleanup: "nothing beyond the lock's own ephemeral nodes under %s, which end with their sessions; lockpick never kills, pauses or restarts a member of an external ensemble"}
}

func (zkTopology) Size(s *Size) error {
	if s.Nodes == 0 {
		s.Nodes = 3
	}
	if s.Nodes < 1 || s.Nodes > 7 {
		return fmt.Errorf("--nodes %d: 1 to 7 members", s.Nodes)
	}
	return nil
}

func (zkTopology) persistence(Config) Persistence { return "" }

func (zkTopology) external(context.Context, Config) (System, error) {
	return nil, errors.New("system zookeeper: runs local members only (an external ensemble and the docker backend are not supported yet)")
}

type zkSys struct {
	backend nodeBackend
	links   *links.Set
	demux   []*zkDemux // per member, its peer address
	nodes   []Node
	log     *slog.Logger

	roles *leaderWatch
}

func (zkTopology) start(ctx context.Context, b *bed, layout []Node) (_ System, err error) {
	if !b.loopback {
		b.backend.Close()
		return nil, errors.New("system zookeeper: runs local members only (an external ensemble and the docker backend are not supported yet)")
	}
	s := &zkSys{backend: b.backend, links: links.New(), nodes: layout, log: b.cfg.Logger}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, err
	}
	var cp []string
	for _, j := range zkJars() {
		cp = append(cp, "/usr/share/java/"+j+".jar")
	}
	reserved, err := ReservePorts(3 * len(layout))
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, l := range reserved {
			l.Close()
		}
	}()
	port := func(i int) int { return reserved[i].Addr().(*net.TCPAddr).Port }
	for i := range s.nodes {
		s.nodes[i].Addr = reserved[3*i].Addr().String()
		d, err := newZKDemux(fmt.Sprintf("127.0.0.1:%d", port(3*i+1)), fmt.Sprintf("127.0.0.1:%d", port(3*i+2)))
		if err != nil {
			return nil, err
		}
		s.demux = append(s.demux, d)
	}
	if err := s.addLinks(b.cfg.Groups); err != nil {
		return nil, err
	}
	for i, n := range s.nodes {
		servers, err := s.serverLines(i, port(3*i+1), port(3*i+2))
		if err != nil {
			return nil, err
		}
		nd := filepath.Join(b.dir, n.Name)
		data := filepath.Join(nd, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, fmt.Errorf("member %s: %w", n.Name, err)
		}
		// myid lives beside version-2, which a start without data removes; myid stays.
		if err := os.WriteFile(filepath.Join(data, "myid"), fmt.Appendf(nil, "%d\n", i+1), 0o644); err != nil {
			return nil, fmt.Errorf("member %s: %w", n.Name, err)
		}
		if err := os.WriteFile(filepath.Join(nd, "zoo.cfg"), []byte(zkConfig(data, port(3*i), servers)), 0o644); err != nil {
			return nil, fmt.Errorf("member %s: %w", n.Name, err)
		}
		cmd := []string{java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-cp", strings.Join(cp, ":"),
			"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(nd, "zoo.cfg")}
		addr := n.Addr
		ready := func(ctx context.Context) error { return s.ready(ctx, addr) }
		if _, err := b.t.add(ctx, nodeSpec{name: n.Name, dir: nd, cmd: cmd, addr: n.Addr,
			data: []string{filepath.Join(data, "version-2")}, ready: ready, startWait: zkStartWait,
			readyLog: logLine{file: "stdout.log", text: "Peer state changed"}}); err != nil {
			return nil, err
		}
	}
	for _, l := range reserved {
		l.Close()
	}
	for _, n := range s.nodes {
		if err := s.backend.Start(ctx, n.Name); err != nil {
			return nil, err
		}
	}
	if err := poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		for _, n := range s.nodes {
			if zkMode(n.Addr) == "" {
				return false, nil
			}
		}
		return true, nil
	}, func() string { return "the zookeeper ensemble did not serve" }); err != nil {
		return nil, err
	}
	s.roles = watchLeader("zookeeper", s.nodes, 200*time.Millisecond, s.leaderNow, s.log)
	return s, nil
}

// addLinks puts a link on every path: each client group to each member's client port, and each
// member to each other member's peer demux.
func (s *zkSys) addLinks(groups []string) error {
	for j, to := range s.nodes {
		for _, g := range groups {
			if _, err := s.links.Add(g, to.Name, to.Addr); err != nil {
				return err
			}
		}
		for _, from := range s.nodes {
			if from.Name != to.Name {
				if _, err := s.links.Add(from.Name, to.Name, s.demux[j].Addr()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// serverLines is member i's view of the ensemble: its own quorum and election ports, and every
// other member at the link from member i to it: the quorum port the link itself, the election port
// a relay into the same link (a member refuses one address for both; the callee's demux tells them
// apart).
func (s *zkSys) serverLines(i, quorum, election int) (string, error) {
	var lines []string
	for j, n := range s.nodes {
		if j == i {
			lines = append(lines, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", j+1, quorum, election))
			continue
		}
		l, err := s.links.Get(s.nodes[i].Name, n.Name)
		if err != nil {
			return "", err
		}
		relay, err := newZKDemux(l.Addr, l.Addr)
		if err != nil {
			return "", err
		}
		s.demux = append(s.demux, relay)
		_, relayPort, err := net.SplitHostPort(relay.Addr())
		if err != nil {
			return "", fmt.Errorf("relay to %s: %w", n.Name, err)
		}
		// Both on 127.0.0.1: the link's and the relay's listeners.
		lines = append(lines, fmt.Sprintf("server.%d=%s:%s", j+1, l.Addr, relayPort))
	}
	return strings.Join(lines, "\n"), nil
}

// zkConfig is a member's zoo.cfg: ticks of 500 ms (a follower that misses syncLimit ticks, 2.5 s,
// leaves the leader), sessions from 1 s, and the 4lw srvr and mntr the roles are read from.
func zkConfig(data string, clientPort int, servers string) string {
	return fmt.Sprintf("tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"minSessionTimeout=1000\nadmin.enableServer=false\n4lw.commands.whitelist=srvr,mntr,ruok\n%s\n", data, clientPort, servers)
}

// ready: a member listens; with a majority running, it serves.
func (s *zkSys) ready(ctx context.Context, addr string) error {
	return quorumReady(ctx, s.backend, s.nodes, addr, func() error {
		if zkMode(addr) == "" {
			return errors.New("not serving")
		}
		return nil
	})
}

// zkMode asks a member's srvr for its mode (leader, follower, standalone); "" when it serves none.
func zkMode(addr string) string {
	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err != nil {
		return ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return ""
	}
	var out []byte
	b := make([]byte, 2048)
	for {
		k, err := c.Read(b)
		out = append(out, b[:k]...)
		if err != nil {
			break
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

// leaderNow is the member whose srvr says it leads, or "" while none does.
func (s *zkSys) leaderNow(context.Context) string {
	for _, n := range s.nodes {
		if zkMode(n.Addr) == "leader" {
			return n.Name
		}
	}
	return ""
}

func (s *zkSys) Name() string           { return "zookeeper" }
func (s *zkSys) Nodes() []Node          { return append([]Node(nil), s.nodes...) }
func (s *zkSys) Roles() map[string]Role { return s.roles.current() }
func (s *zkSys) Endpoints(group string) ([]Endpoint, error) {
	return groupEndpoints(s.links, group, s.nodes, func(n Node) string { return n.Addr })
}
func (s *zkSys) Links() *links.Set   { return s.links }
func (s *zkSys) Backend() Backend    { return s.backend }
func (s *zkSys) Watch(f func(Event)) { s.roles.subscribe(f) }
func (s *zkSys) HoldWrites(context.Context, string, time.Duration, func(context.Context) error) error {
	return errors.New("zookeeper members cannot hold writes back")
}
func (s *zkSys) Ping(_ context.Context, node string) error {
	for _, n := range s.nodes {
		if n.Name == node && zkMode(n.Addr) != "" {
			return nil
		}
	}
	return fmt.Errorf("member %s does not serve", node)
}
func (s *zkSys) Close() error {
	if s.roles != nil {
		s.roles.close()
	}
	err := s.backend.Close()
	s.links.Close()
	for _, d := range s.demux {
		d.Close()
	}
	return err
}
