// Package systems runs the systems under test: the nodes a lock needs, with their roles and every
// network path between them and the clients.
//
// A system is a topology on a backend, never written out per pair. A Topology (one file per
// family: masters.go, sentinel.go, etcd.go, listed in topology.go's registry) gives the nodes and
// their first roles, the programs they run, its size rules, and the paths between its servers. A
// backend (bed.go) is one node table (nodes.go: the lifecycle, written once) over a runner: local
// child processes (runlocal.go), Docker (docker.go) or a remote Docker Engine (dockerremote.go);
// external servers (external.go) refuse every node fault. A System names the role of each node and
// reports the current one (a replica the sentinels promote becomes the primary), gives each client
// group an endpoint per node through a link, and puts a link on every path between servers too, so
// that a fault can cut replication or isolate a master from its sentinels while clients still reach
// it. Nemeses and the harness speak to a system only through this package's interfaces, never to a
// server family by assumption; Capabilities says before a run which node operations a pair offers.
package systems

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"syscall"
	"time"

	"github.com/lockpick-dev/lockpick/links"
)

// Role is what a node does in its system at some moment.
type Role string

// Roles of the systems here.
const (
	// RoleMaster is an independent master (redis-masters): it serves clients and replicates nothing.
	RoleMaster Role = "master"
	// RolePrimary is the node a replicated system writes to: the master the sentinels point at.
	RolePrimary Role = "primary"
	// RoleReplica copies the primary and is promoted when the primary fails.
	RoleReplica Role = "replica"
	// RoleSentinel watches the primary and replicas and runs the failover.
	RoleSentinel Role = "sentinel"
)

// Node is one server process of a system.
type Node struct {
	Name string
	// Role is the role the node starts with; Roles tells the current one.
	Role Role
	// Addr is the node's own address, for the harness's use only: it bypasses every link.
	Addr string
	// Data reports whether the node stores the lock's keys (a master, primary or replica; not a
	// sentinel), so a lease probe reads it.
	Data bool
}

// Endpoint is how a client of one group reaches one node.
type Endpoint struct {
	Node string
	// Role is the node's role when the run started.
	Role Role
	// Addr is where the client connects: the node's link for the client's group.
	Addr string
	// Dial, when set, connects a client in this process through that link without the hop through
	// its listener (links.Link.Dial); nil means dialling Addr.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Known is the address the servers know the node by, as they hand it to clients (a sentinel
	// answering "where is the master"); a client maps it to Addr with Endpoints.Dial-style lookups.
	Known string
}

// DialWith connects to the endpoint's node as d would dial Addr (its timeout included), through Dial
// when the endpoint has one.
func (e Endpoint) DialWith(ctx context.Context, d *net.Dialer, network string) (net.Conn, error) {
	if e.Dial == nil {
		return d.DialContext(ctx, network, e.Addr)
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	return e.Dial(ctx, network, e.Addr)
}

// Event is something a system announced by itself during a run: a sentinel's view of a failover,
// and every change of the roles the system reports.
type Event struct {
	Time time.Time
	// From is the node that announced it (a sentinel), empty for the system's own conclusion.
	From string
	// Kind is the announcement: "+switch-master", "+sdown", ..., or KindRoles for a change of roles.
	Kind string
	// Text is the announcement with addresses replaced by node names.
	Text string
	// Roles are, on KindRoles, the new role of every node whose role changed.
	Roles map[string]Role
}

// KindRoles is the Event kind of a change of the roles the system reports.
const KindRoles = "roles"

// System is a running system under test.
type System interface {
	// Name is the system's name, as Names lists it.
	Name() string
	// Nodes lists every node in a stable order, with the role it started with.
	Nodes() []Node
	// Roles reports the current role of every node. It answers at once, from what the system last
	// learned; a change is also announced as an Event of kind KindRoles.
	Roles() map[string]Role
	// Endpoints lists, for a client of group, an endpoint per node a client may talk to.
	Endpoints(group string) ([]Endpoint, error)
	// Links are every proxied path: from each client group to each node, and between servers.
	Links() *links.Set
	// Backend starts, stops and signals the nodes and moves their clocks.
	Backend() Backend
	// Watch calls f with every event from now on, in order, from one goroutine; f must not block.
	Watch(f func(Event))
	// HoldWrites holds back client writes on node while f runs (at most max), so that what f sees
	// of the node's keys stays true until it returns.
	HoldWrites(ctx context.Context, node string, max time.Duration, f func(ctx context.Context) error) error
	// Ping asks node, over its own address, whether it serves.
	Ping(ctx context.Context, node string) error
	// Close stops every node and link. It is safe to call more than once.
	Close() error
}

// Backend runs the nodes. Operations a backend cannot perform return an error saying so.
type Backend interface {
	// Start starts a stopped node and waits until it answers, with the data it kept (none when the
	// system runs without persistence).
	Start(ctx context.Context, node string) error
	// StartEmpty starts a stopped node without any of its data, whatever the persistence.
	StartEmpty(ctx context.Context, node string) error
	// Kill stops a node at once (SIGKILL); killing a stopped node does nothing.
	Kill(node string) error
	// Running reports whether a node's process is up.
	Running(node string) bool
	// Signal sends sig to a running node (SIGSTOP and SIGCONT pause and continue it).
	Signal(node string, sig syscall.Signal) error
	// ClockShim reports whether the nodes run with the clock shim, so their clocks can move.
	ClockShim() bool
	// SetClockOffset shifts a node's wall clock by offset from the real time.
	SetClockOffset(node string, offset time.Duration) error
	// ClockOffset measures a node's offset against the harness clock.
	ClockOffset(node string) (time.Duration, error)
	// Pid is a running node's process id in its host (this machine's for --backend local), 0 when
	// the node is down or not a process lockpick started.
	Pid(node string) int
}

// Lease is a lease as the nodes hold it: the key, the value, and the nodes whose copy of the key
// holds that value.
type Lease struct {
	Key   string
	Value string
	Nodes []string
}

// LeaseProbe answers "which nodes hold which lease now", for lock-aware faults. A lock offers it,
// as only the lock knows how it stores a lease.
type LeaseProbe interface {
	// Leases reads the keys on every node that stores the lock's data and groups the copies by
	// lease, largest first. Nodes that do not answer are left out.
	Leases(ctx context.Context, keys []string) []Lease
}

// Config describes a system to start. Zero values take the defaults of the system.
type Config struct {
	// Dir holds one subdirectory per node; it is made absolute.
	Dir string
	// Groups are the client groups; each gets a link to every node a client may talk to.
	Groups      []string
	RedisServer string
	Persistence Persistence
	// BasePort, when not zero, puts the nodes' own ports from BasePort on (redis-masters only).
	BasePort int
	// ClockShim, when set, is the clock shim every node runs with.
	ClockShim string
	Logger    *slog.Logger
	// Direct lets the client groups reach the nodes without links, for runs no nemesis of which
	// touches a link: a proxy costs ~75 us per round trip. redis-masters honours it; the systems
	// whose servers talk to each other keep their links (their routing relies on them).
	Direct bool

	// Nodes is the number of masters of redis-masters.
	Nodes int
	// Sentinel is the layout and timing of redis-sentinel.
	Sentinel SentinelConfig
	// Etcd is the size and server program of etcd.
	Etcd EtcdConfig
	// Postgres is the server programs of postgres.
	Postgres PostgresConfig

	// Backend runs the nodes: BackendLocal (empty) or BackendDocker.
	Backend string
	// Docker is the Engine and run label of BackendDocker.
	Docker DockerConfig
	// SSH is the hosts and credentials of BackendSSH.
	SSH SSHConfig
	// Endpoints are the servers of BackendExternal, host:port each.
	Endpoints []string
	// KeyPrefix is the run's unique key prefix: on BackendExternal, Close deletes the keys that
	// hold it, and no other.
	KeyPrefix string
	// MasterName is the name external sentinels monitor the primary under (BackendExternal).
	MasterName string
}

// StaticRoles is the role view of a system that is not running: every node in its first role.
// It stands in for a System when a configuration is checked.
type StaticRoles []Node

// Roles implements the role view.
func (s StaticRoles) Roles() map[string]Role {
	out := make(map[string]Role, len(s))
	for _, n := range s {
		out[n.Name] = n.Role
	}
	return out
}

// WithRole lists the nodes that have role in roles, sorted.
func WithRole(roles map[string]Role, role Role) []string {
	var out []string
	for n, r := range roles {
		if r == role {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
