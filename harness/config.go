// Package harness is the run loop: it starts the system the lock needs (its nodes, roles and links),
// starts the processes and the nemesis, records the history with the system's role changes, stops
// at the time limit, heals, lets the system recover, checks the history and stores the run.
package harness

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/nemesis"
	"github.com/lockpick-dev/lockpick/resource"
	"github.com/lockpick-dev/lockpick/systems"
	"github.com/lockpick-dev/lockpick/workloads"
)

// Duration is a time.Duration that reads and writes JSON as text ("2s").
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Config is one run, resolved: every default filled in, stored as config.json with the run.
type Config struct {
	Name    string `json:"name"`
	Lock    string `json:"lock"`
	Nemesis string `json:"nemesis"`
	// Workload is mutex (acquire, hold, release) or counter (a read-modify-write of a counter on a
	// separate resource node under the lock); empty means mutex.
	Workload string `json:"workload"`
	// Guard is how the counter's resource checks writes: none, fencing or check-and-set.
	Guard string `json:"guard,omitempty"`
	// System is the system the lock runs on (systems.Names); empty means the one the lock needs
	// (locks.NeedsOf), and another is refused.
	System string `json:"system"`
	// Nodes is the number of masters of redis-masters; zero means 5 for redlock and 1 for single and
	// fenced. Single and fenced take exactly one node; redlock an odd number of at least 3, unless
	// AllowEvenNodes. It stays zero on other systems.
	Nodes int `json:"nodes,omitempty"`
	// Replicas and Sentinels size redis-sentinel (one primary, Replicas replicas, Sentinels
	// sentinels with a majority quorum); zero means 2 and 3. Replicas is also postgres's streaming
	// replicas (0 or 1, default 0). They stay zero on other systems.
	Replicas  int `json:"replicas,omitempty"`
	Sentinels int `json:"sentinels,omitempty"`
	// Synchronous makes postgres's primary wait for its replica's flush before a commit returns.
	Synchronous bool `json:"synchronous,omitempty"`
	// AllowEvenNodes lets redlock run on an even number of nodes (2, 4, ...), which adds a node
	// without adding a failure the quorum survives; a user who wants it says so.
	AllowEvenNodes bool     `json:"allow_even_nodes,omitempty"`
	Persistence    string   `json:"persistence"`
	Clients        int      `json:"clients"`
	ClientGroups   int      `json:"client_groups"`
	Keys           int      `json:"keys"`
	TTL            Duration `json:"ttl"`
	TimeLimit      Duration `json:"time_limit"`
	// Recovery is the fault-free phase after the final heal.
	Recovery Duration `json:"recovery"`
	// Interval is the mean time between faults.
	Interval Duration `json:"interval"`
	// RestartDelay is how long restart-delayed keeps a node down; zero means TTL plus half a TTL.
	RestartDelay Duration `json:"restart_delay"`
	// NodeTimeout bounds each lock request to one node; zero means DefaultNodeTimeout(TTL).
	NodeTimeout Duration `json:"node_timeout"`
	// HoldMax, when set, draws the mutex workload's holds uniformly from [0, HoldMax]; zero draws
	// them across each lease's validity, some close to the deadline and a few past it
	// (workloads.HoldEdge). Holds are not cut at the lease's deadline: work past it is an overrun.
	HoldMax Duration `json:"hold_max,omitempty"`
	// HoldMin, with HoldMax, raises the uniform draw's floor: holds from [HoldMin, HoldMax]. A
	// failover run uses it so that every hold a kill hits outlives the promotion.
	HoldMin Duration `json:"hold_min,omitempty"`
	// Careful makes mutex holders check their remaining validity and never plan work past it.
	Careful bool `json:"careful,omitempty"`
	// Extend makes mutex holders renew their leases (Locker.Extend) for work longer than a lease.
	Extend bool `json:"extend,omitempty"`
	// StopAtFirst ends the fault phase at the first violation the live monitor sees (the recovery
	// phase and the full check follow): a run expected to be invalid stops once it has shown it.
	StopAtFirst bool `json:"stop_at_first,omitempty"`
	// Reentrant: mutex holders of a reentrant lock enter it again inside their hold, and refused
	// clients now and then unlock a key they do not hold.
	Reentrant bool `json:"reentrant,omitempty"`
	// WatchdogTimeout is a watchdog lock's lease time (renewed every third of it); zero means the TTL.
	WatchdogTimeout Duration `json:"watchdog_timeout,omitempty"`
	// ThinkMax bounds the pause a process takes between its operations; zero means
	// DefaultThinkMax(Clients, Keys, TTL).
	ThinkMax     Duration `json:"think_max"`
	CheckTimeout Duration `json:"check_timeout"`
	Seed         uint64   `json:"seed"`
	Store        string   `json:"store"`
	BasePort     int      `json:"base_port,omitempty"`
	RedisServer  string   `json:"redis_server,omitempty"`
	// EtcdServer is the etcd program of the etcd system: "system" (etcd on PATH, the default),
	// "current" (systems.EtcdCurrentVersion built from the Go module proxy and cached) or a path.
	EtcdServer string `json:"etcd_server,omitempty"`
	// Etcd is the etcd program that ran and its version, found when the run starts.
	Etcd *systems.EtcdServer `json:"etcd,omitempty"`
	// ClockShim is the LD_PRELOAD clock shim's path; empty finds or builds one when a nemesis
	// moves clocks. Nodes run without the shim unless a nemesis needs it.
	ClockShim string `json:"clock_shim,omitempty"`

	// ClientCmd is the program and arguments of --lock client, its program's path made absolute.
	ClientCmd []string `json:"client_cmd,omitempty"`
	// ClientCaps are what --lock client's program offers (validity, token, extend, watchdog,
	// reentrant), as the user declares them; the program's init_ok must not claim less.
	ClientCaps []string `json:"client_capabilities,omitempty"`
	// Backend runs the system's nodes: local (child processes, the default) or docker (containers
	// on a private bridge network); see systems.Backends.
	Backend string `json:"backend,omitempty"`
	// DockerHost is the Docker Engine of the docker backend; empty means DOCKER_HOST or the local
	// socket.
	DockerHost string `json:"docker_host,omitempty"`
	// DockerPublishHost is where this host reaches the ports a remote Engine publishes (the nodes);
	// empty means the host of DockerHost. An Engine reached through a tunnel needs it.
	DockerPublishHost string `json:"docker_publish_host,omitempty"`
	// SSHHosts are the hosts of the ssh backend; SSHUser, SSHKey and SSHKnownHosts (or one
	// SSHFingerprints entry per host) say how to log in and whom to trust (sshOptions).
	SSHHosts        []string `json:"ssh_hosts,omitempty"`
	SSHUser         string   `json:"ssh_user,omitempty"`
	SSHKey          string   `json:"ssh_key,omitempty"`
	SSHKnownHosts   string   `json:"ssh_known_hosts,omitempty"`
	SSHFingerprints []string `json:"ssh_fingerprints,omitempty"`
	// AllowHostClock lets clock:source=host move the ssh hosts' real clocks: systems.HostClockOwn,
	// or systems.HostClockShared where hosts share a kernel; empty refuses it.
	AllowHostClock string `json:"allow_host_clock,omitempty"`
	// Endpoints are the servers of the external backend, host:port each, run by someone else.
	Endpoints []string `json:"endpoints,omitempty"`
	// KeyPrefix goes before every lock key; the external backend sets a unique one, and deletes
	// only keys holding it.
	KeyPrefix string `json:"key_prefix,omitempty"`
	// MasterName is the name external sentinels monitor the primary under (the sentinel locks on
	// --backend external, whose --endpoints are then sentinels).
	MasterName string `json:"master_name,omitempty"`

	// Library is the library the run tested: for a client program what its init_ok said (with a
	// note where processes disagreed), for an adapted Go library its module and the version built
	// into lockpick, for a built-in lock "lockpick NAME" at Revision. It is known once the clients
	// start: config.json is written again then.
	Library *history.Library `json:"library,omitempty"`
	// Version is the lockpick version to cite (a release tag, or a pseudo-version naming the
	// commit: lockpick version prints it); Revision is the whole git revision it was built from;
	// Command is how it was invoked.
	Version  string   `json:"version,omitempty"`
	Revision string   `json:"revision"`
	Command  []string `json:"command,omitempty"`

	// Spelling is how the user gave these options (flags or a scenario file), for Resolve's errors
	// to name them so; it is not part of the run.
	Spelling Spelling `json:"-"`

	// faults are Nemesis parsed, and offer what the system on its backend can do for them: both
	// set by Resolve, which everything after it takes.
	faults []nemesis.Fault
	offer  nemesis.Offer
}

// opt is the option called name as the user spells it (--ttl or ttl).
func (c *Config) opt(name string) string { return c.Spelling.Name(name) }

// set is the option set to a value as the user would type it (--ttl 2s or ttl: 2s).
func (c *Config) set(name string, value any) string { return c.Spelling.Set(name, fmt.Sprint(value)) }

// Resolve fills in defaults and checks the configuration. Its errors name the option as the user
// spelt it (Spelling) and the fix.
func (c *Config) Resolve() error {
	if err := locks.Validate(c.Lock); err != nil {
		return fmt.Errorf("%s: %w", c.opt("lock"), err)
	}
	if err := c.resolveClient(); err != nil {
		return c.Spelling.Respell(err)
	}
	if c.Nemesis == "" {
		c.Nemesis = "none"
	}
	faults, err := nemesis.ParseFaults(c.Nemesis)
	if err != nil {
		return fmt.Errorf("%s: %w", c.opt("nemesis"), err)
	}
	c.faults, c.Nemesis = faults, nemesis.JoinFaults(faults)
	if err := c.resolveWorkload(); err != nil {
		return c.Spelling.Respell(err)
	}
	if c.Persistence == "" {
		c.Persistence = string(systems.PersistNone)
	}
	if _, err := systems.ParsePersistence(c.Persistence); err != nil {
		return fmt.Errorf("%s: %w", c.opt("persistence"), err)
	}
	if err := c.resolveSizes(); err != nil {
		return err
	}
	if needs, err := locks.NeedsOf(c.Lock); err == nil && !systemTraits(needs.System).Discovers && c.Backend == systems.BackendExternal && c.Nodes == 0 {
		// The endpoints are the nodes; the lock then checks their number as it would --nodes.
		c.Nodes = len(c.Endpoints)
	}
	if err := c.resolveSystem(); err != nil {
		err = c.Spelling.Respell(err)
		if c.Backend == systems.BackendExternal {
			return fmt.Errorf("%w (with --backend external the %d --endpoints are the nodes)", err, len(c.Endpoints))
		}
		return err
	}
	if err := c.resolveBackend(); err != nil {
		return c.Spelling.Respell(err)
	}
	if err := c.resolveTimes(); err != nil {
		return err
	}
	if err := c.resolveHold(); err != nil {
		return c.Spelling.Respell(err)
	}
	if err := c.resolvePlaces(); err != nil {
		return c.Spelling.Respell(err)
	}
	// Parameters are checked now, against the cluster the run will have, so that a bad one stops the
	// run before any node starts.
	for _, f := range c.faults {
		if _, err := f.Build(c.nemesisEnv(nil)); err != nil {
			return fmt.Errorf("%s: %w", c.opt("nemesis"), err)
		}
	}
	return nil
}

// resolveSizes checks the TTL against the time limit, and the numbers of clients, keys and groups.
func (c *Config) resolveSizes() error {
	if c.TTL <= 0 {
		return fmt.Errorf("%s must be positive (for example %s), got %v", c.opt("ttl"), c.set("ttl", "2s"), time.Duration(c.TTL))
	}
	if c.TTL < Duration(10*time.Millisecond) {
		return fmt.Errorf("%s is below Redis's useful resolution: use at least 10ms", c.set("ttl", time.Duration(c.TTL)))
	}
	if c.TimeLimit <= c.TTL {
		return fmt.Errorf("%s is not longer than %s: give the run more than one TTL (for example %s)", c.set("time-limit", time.Duration(c.TimeLimit)), c.set("ttl", time.Duration(c.TTL)), c.set("time-limit", "30s"))
	}
	if c.Clients < 1 || c.Clients > MaxClients {
		return fmt.Errorf("%s must lie between 1 and %d, got %d: %s", c.opt("clients"), MaxClients, c.Clients, maxClientsWhy)
	}
	if c.Keys < 1 {
		return fmt.Errorf("%s must be at least 1, got %d", c.opt("keys"), c.Keys)
	}
	if c.ClientGroups == 0 {
		c.ClientGroups = 1
	}
	if c.ClientGroups < 1 || c.ClientGroups > c.Clients {
		return fmt.Errorf("%s must lie between 1 and %s (%d), got %d", c.opt("client-groups"), c.opt("clients"), c.Clients, c.ClientGroups)
	}
	return nil
}

// resolveTimes fills in and checks the run's phases and timeouts.
func (c *Config) resolveTimes() error {
	if c.WatchdogTimeout < 0 {
		return fmt.Errorf("%s must not be negative, got %v", c.opt("watchdog-timeout"), time.Duration(c.WatchdogTimeout))
	}
	if k, err := c.kind(); err == nil && !k.Open && c.WatchdogTimeout > 0 {
		return fmt.Errorf("%s applies to watchdog locks (watchdog, r2m), not %s: drop it", c.opt("watchdog-timeout"), c.set("lock", c.Lock))
	}
	if c.Recovery < 0 {
		return fmt.Errorf("%s must not be negative, got %v", c.opt("recovery"), time.Duration(c.Recovery))
	}
	if c.Interval == 0 {
		c.Interval = Duration(5 * time.Second)
	}
	if c.Interval < 0 {
		return fmt.Errorf("%s must be positive, got %v", c.opt("interval"), time.Duration(c.Interval))
	}
	if c.RestartDelay == 0 {
		c.RestartDelay = c.TTL + c.TTL/2
	}
	if c.RestartDelay < 0 {
		return fmt.Errorf("%s must be positive, got %v", c.opt("restart-delay"), time.Duration(c.RestartDelay))
	}
	if c.NodeTimeout == 0 {
		c.NodeTimeout = Duration(DefaultNodeTimeout(time.Duration(c.TTL)))
	}
	if c.NodeTimeout < 0 || c.NodeTimeout >= c.TTL {
		return fmt.Errorf("%s must be positive and well below %s", c.set("node-timeout", time.Duration(c.NodeTimeout)), c.set("ttl", time.Duration(c.TTL)))
	}
	if c.CheckTimeout == 0 {
		c.CheckTimeout = Duration(2 * time.Minute)
	}
	if c.CheckTimeout < 0 {
		return fmt.Errorf("%s must be positive, got %v", c.opt("check-timeout"), time.Duration(c.CheckTimeout))
	}
	return nil
}

// MaxClients is the most client processes a run may have. Each is a goroutine with a connection to
// every node through an in-process proxy (two more sockets per connection), so 1000 clients of a
// five-node Redlock hold some 15,000 sockets and keep both cores of a small machine busy with the
// harness's own work: past that the outcome measures the harness, not the lock.
const MaxClients = 1000

const maxClientsWhy = "each client holds a proxied connection to every node, and past 1000 the harness's own CPU and sockets, not the lock, decide the outcome"

// DefaultNodeTimeout is the node timeout of a run that sets none: TTL/4 within [50ms, 2s]. The
// Redlock paper asks for a timeout small beside the TTL (a node that is down must not eat the
// validity); on a loaded machine a request through the harness's proxies can wait tens of
// milliseconds for a core, and a timeout shorter than that turns every slow reply into an unknown
// outcome. A quarter of the TTL leaves three quarters of validity to a lease granted at the timeout.
func DefaultNodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/4, 50*time.Millisecond), 2*time.Second)
}

// DefaultThinkMax is the think time of a run that sets none: the pause a process takes after each
// operation (and before its first) is drawn from [0, ThinkMax]. It grows with the number of
// processes per key, 20ms for each, so that the load stays the same as clients are added: a key
// sees about 100 attempts a second from its contenders together, whatever their number, which keeps
// it busy (a released key is asked for again within milliseconds) without making the harness the
// bottleneck. It never exceeds the TTL, so every process keeps asking several times per lease.
//
// Measured on a loaded 2-core machine, 100 clients on 10 keys: with 20ms for everyone (the old
// default), single made 6,000 attempts a second and Redlock through its proxies collapsed (every
// acquire timed out); with this default both stay under 1% unknown outcomes.
func DefaultThinkMax(clients, keys int, ttl time.Duration) time.Duration {
	perKey := (clients + keys - 1) / keys
	return min(max(20*time.Millisecond, time.Duration(perKey)*20*time.Millisecond), max(ttl, 20*time.Millisecond))
}

// resolveSystem sets the system the lock needs and checks its size: the flags of one system are
// refused on another, never ignored.
func (c *Config) resolveSystem() error {
	needs, err := locks.Lookup(c.Lock)
	if err != nil {
		return fmt.Errorf("--lock: %w", err)
	}
	if c.System == "" {
		c.System = needs.System
	}
	if err := systems.Validate(c.System); err != nil {
		return fmt.Errorf("--system: %w", err)
	}
	if needs.User && c.System != needs.System {
		needs.System, needs.Nodes = c.System, 0 // a user's program runs on the system the user names
	}
	if c.System != needs.System {
		return fmt.Errorf("--system %s: --lock %s runs on %s: drop --system", c.System, c.Lock, needs.System)
	}
	t, err := systems.Lookup(c.System)
	if err != nil {
		return fmt.Errorf("--system: %w", err)
	}
	if c.EtcdServer != "" && t.Traits().Server != "etcd-server" {
		return fmt.Errorf("--etcd-server chooses the etcd of the etcd system, and --lock %s runs on %s: drop it", c.Lock, c.System)
	}
	size := systems.Size{Nodes: c.Nodes, Replicas: c.Replicas, Sentinels: c.Sentinels, External: c.Backend == systems.BackendExternal, Lock: c.Lock}
	if err := t.Size(&size); err != nil {
		return err
	}
	c.Nodes, c.Replicas, c.Sentinels = size.Nodes, size.Replicas, size.Sentinels
	if c.Synchronous && (c.System != "postgres" || c.Replicas == 0) {
		return fmt.Errorf("--synchronous makes postgres's replica synchronous, and this run has none (--lock %s, %d replicas): add --replicas 1 on a postgres lock, or drop --synchronous", c.Lock, c.Replicas)
	}
	if t.Traits().LockSized {
		return c.resolveNodes(needs.Nodes)
	}
	return nil
}

// traits are what the run's system is, as far as a configuration must know.
func (c *Config) traits() systems.Traits { return systemTraits(c.System) }

// systemTraits are the named system's traits; none for an unknown one (Resolve refuses it).
func systemTraits(system string) systems.Traits {
	t, err := systems.Lookup(system)
	if err != nil {
		return systems.Traits{}
	}
	return t.Traits()
}

// systemConfig is the configuration of the run's system, its nodes under dir.
func (c *Config) systemConfig(dir, shim string, log *slog.Logger) systems.Config {
	return systems.Config{
		Dir: dir, Groups: c.GroupNames(), RedisServer: c.RedisServer, Persistence: systems.Persistence(c.Persistence),
		BasePort: c.BasePort, ClockShim: shim, Logger: log, Direct: !c.NeedsLinks(),
		Nodes: c.Nodes, Sentinel: systems.SentinelConfig{Replicas: c.Replicas, Sentinels: c.Sentinels},
		Postgres: systems.PostgresConfig{Replicas: c.postgresReplicas(), Synchronous: c.Synchronous},
		Etcd:     systems.EtcdConfig{Members: c.Nodes, Server: c.etcdPath()},
		Backend:  c.Backend, Endpoints: c.Endpoints, KeyPrefix: c.KeyPrefix, MasterName: c.MasterName,
	}
}

// postgresReplicas is the postgres system's replica count; zero on other systems.
func (c *Config) postgresReplicas() int {
	if c.System != "postgres" {
		return 0
	}
	return c.Replicas
}

func (c *Config) etcdPath() string {
	if c.Etcd == nil {
		return ""
	}
	return c.Etcd.Path
}

// layout lists the nodes the run's system will have, with their first roles.
func (c *Config) layout() []systems.Node {
	nodes, _ := systems.Layout(c.System, c.systemConfig("", "", nil))
	return nodes
}

// resolveNodes checks the node count of redis-masters against the lock: single and fenced use one
// node, Redlock a majority of an odd count (def is the lock's default).
func (c *Config) resolveNodes(def int) error {
	kind, err := locks.Lookup(c.Lock) // a self-test mutant takes the rules of the lock it breaks
	if err != nil {
		return fmt.Errorf("--lock: %w", err)
	}
	one := def == 1 && !kind.User
	if c.Nodes < 0 {
		return fmt.Errorf("--nodes must be at least 1, got %d", c.Nodes)
	}
	if c.Nodes == 0 {
		c.Nodes = def
	}
	switch {
	case c.Nodes > 99:
		return fmt.Errorf("--nodes must lie between 1 and 99, got %d", c.Nodes)
	case one && c.Nodes != 1:
		return fmt.Errorf("--lock %s uses one node, got --nodes %d: drop --nodes (or use --lock redlock for several nodes)", c.Lock, c.Nodes)
	case !kind.Majority:
	case c.Nodes == 1:
		return fmt.Errorf("--lock %s needs at least 3 nodes, got --nodes 1: use --nodes 3 or 5 (a majority of one node is --lock single)", c.Lock)
	case c.Nodes%2 == 0 && !c.AllowEvenNodes:
		use := fmt.Sprintf("--nodes %d or %d", c.Nodes-1, c.Nodes+1)
		if c.Nodes == 2 {
			use = "--nodes 3"
		}
		return fmt.Errorf("--lock %s takes an odd number of nodes, got --nodes %d: use %s (an even count survives no more failures than one node fewer), or add --allow-even-nodes", c.Lock, c.Nodes, use)
	}
	return nil
}

// resolveHold sets the mutex workload's hold and think times. The counter workload holds a lease
// for one read and one write, so a hold time given to it would be ignored: it is refused.
func (c *Config) resolveHold() error {
	if c.HoldMax < 0 {
		return fmt.Errorf("--hold-max must not be negative, got %v", time.Duration(c.HoldMax))
	}
	if c.ThinkMax < 0 {
		return fmt.Errorf("--think-max must not be negative, got %v", time.Duration(c.ThinkMax))
	}
	if c.ThinkMax == 0 {
		c.ThinkMax = Duration(DefaultThinkMax(c.Clients, c.Keys, time.Duration(c.TTL)))
	}
	if c.Workload != "mutex" {
		// The counter workload's --extend is one renewal between the read and the write.
		for _, f := range []struct {
			name string
			set  bool
		}{{"--hold-max", c.HoldMax != 0}, {"--hold-min", c.HoldMin != 0}, {"--careful", c.Careful}, {"--reentrant", c.Reentrant}} {
			if f.set {
				return fmt.Errorf("%s applies to the mutex workload; the %s workload holds a lease for one read and one write: drop %s", f.name, c.Workload, f.name)
			}
		}
		if !c.Extend {
			return nil
		}
	}
	switch {
	case c.HoldMin < 0:
		return fmt.Errorf("--hold-min must not be negative, got %v", time.Duration(c.HoldMin))
	case c.HoldMin > 0 && c.HoldMax == 0:
		return fmt.Errorf("--hold-min %v raises the floor of holds drawn uniformly up to --hold-max: add --hold-max (for example --hold-max %v)", time.Duration(c.HoldMin), 2*time.Duration(c.HoldMin))
	case c.HoldMin > c.HoldMax:
		return fmt.Errorf("--hold-min %v is above --hold-max %v: holds are drawn from [hold-min, hold-max]", time.Duration(c.HoldMin), time.Duration(c.HoldMax))
	}
	kind, err := c.kind()
	if err != nil {
		return err
	}
	switch {
	case kind.WholeSeconds && (time.Duration(c.TTL) < time.Second || time.Duration(c.TTL)%time.Second != 0):
		return fmt.Errorf("--ttl %v: --lock %s takes its TTL in whole seconds: use --ttl 2s, 3s, ...", time.Duration(c.TTL), c.Lock)
	case c.Extend && kind.NoExtend && kind.User:
		return fmt.Errorf("--extend: --lock client cannot renew a lease on request unless its program offers extend: add --client-capabilities extend (and answer extend requests), or drop --extend")
	case c.Extend && kind.NoExtend && kind.Program:
		return fmt.Errorf("--extend: --lock %s cannot renew a lease on request (its library offers no renewal the client can ask for): drop --extend", c.Lock)
	case c.Extend && kind.NoExtend:
		return fmt.Errorf("--extend: --lock %s cannot renew a lease on request (a watchdog lock renews by itself; seed 002's locks have no renewal): drop --extend", c.Lock)
	case c.Careful && kind.Open:
		return fmt.Errorf("--careful: --lock %s promises no deadline to check (its hold lasts until release): drop --careful", c.Lock)
	case c.Extend && c.Careful:
		return fmt.Errorf("--extend and --careful together: an extending holder already renews before its deadline; drop one of them")
	case c.Extend && c.HoldMax != 0:
		return fmt.Errorf("--extend draws work across three validities and renews the lease for it: drop --hold-max")
	}
	return nil
}

// Expiry is the longest a lease outlives a holder that died: the watchdog timeout for watchdog
// locks; on etcd the session's TTL (whole seconds) plus the election timeout, since a new leader
// starts every lease afresh with that much added; else the TTL.
func (c *Config) Expiry() time.Duration {
	k, err := c.kind()
	switch {
	case err == nil && k.Open && c.WatchdogTimeout > 0:
		return time.Duration(c.WatchdogTimeout)
	case err == nil:
		return systemTraits(k.System).Expiry(time.Duration(c.TTL))
	}
	return time.Duration(c.TTL)
}

// resolvePlaces makes the store absolute (a node runs in its own directory, so a relative path
// would mean something else to it) and checks or derives the run's name.
func (c *Config) resolvePlaces() error {
	if c.Store == "" {
		c.Store = "store"
	}
	store, err := filepath.Abs(c.Store)
	if err != nil {
		return fmt.Errorf("--store %s: %w", c.Store, err)
	}
	c.Store = store
	if c.Name != "" {
		return CheckName(c.Name)
	}
	name := c.Lock + "-" + nemesis.Slug(c.Nemesis)
	if c.Persistence != string(systems.PersistNone) {
		name += "-" + c.Persistence
	}
	if c.Workload == "counter" {
		name += "-counter-" + c.Guard
	}
	c.Name = strings.Map(func(r rune) rune {
		if nameChar(r) {
			return r
		}
		return '-'
	}, name)
	return nil
}

// CheckName checks a run name: a plain name of letters, digits, '.', '_', '+' and '-', not
// starting with a dot, and not one of the store's own entries (latest, matrix). It becomes a
// directory of the store, so anything else could write outside it or break store/latest.
func CheckName(name string) error {
	if name == "" || strings.HasPrefix(name, ".") || strings.IndexFunc(name, func(r rune) bool { return !nameChar(r) }) >= 0 {
		return fmt.Errorf("--name %q is not a plain name: use letters, digits, '.', '_', '+' and '-', not starting with a dot (for example --name redlock-restart-1)", name)
	}
	if name == "latest" || name == "matrix" {
		return fmt.Errorf("--name %s is taken by the store itself (store/%s): choose another name", name, name)
	}
	return nil
}

func nameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._+-", r)
}

// NeedsClocks reports whether some nemesis moves node clocks, so the nodes need the clock shim.
func (c *Config) NeedsClocks() bool {
	_, ok := c.faultNeeding(nemesis.NodeClocks)
	return ok
}

// NeedsLinks reports whether some nemesis puts faults on links; without one, the clients of a
// redis-masters run reach the nodes directly and pay for no proxy.
func (c *Config) NeedsLinks() bool {
	_, ok := c.faultNeeding(nemesis.Links)
	return ok
}

// faultNeeding is the first of the run's faults that needs capability need.
func (c *Config) faultNeeding(need nemesis.Capability) (nemesis.Fault, bool) {
	i := slices.IndexFunc(c.faults, func(f nemesis.Fault) bool { return f.Needs().Has(need) })
	if i < 0 {
		return nemesis.Fault{}, false
	}
	return c.faults[i], true
}

// NodeNames are the names of the nodes that store the lock's data (not the sentinels): the nodes
// count targets draw from.
func (c *Config) NodeNames() []string {
	var names []string
	for _, n := range c.layout() {
		if n.Data {
			names = append(names, n.Name)
		}
	}
	return names
}

// GroupNames are the client groups' names.
func (c *Config) GroupNames() []string {
	groups := make([]string, c.ClientGroups)
	for g := range groups {
		groups[g] = fmt.Sprintf("c%d", g+1)
	}
	return groups
}

// KeyNames are the lock keys the workload uses.
func (c *Config) KeyNames() []string {
	keys := make([]string, c.Keys)
	for i := range keys {
		keys[i] = c.KeyPrefix + workloads.KeyName(i)
	}
	return keys
}

// nemesisEnv is the part of the nemesis environment the configuration decides; the run adds the
// system's backend, links and roles and the lock's probe.
func (c *Config) nemesisEnv(env *nemesis.Env) nemesis.Env {
	var e nemesis.Env
	if env != nil {
		e = *env
	}
	e.Nodes, e.Groups, e.Keys = c.NodeNames(), c.GroupNames(), c.KeyNames()
	if e.Roles == nil {
		// Before the system runs, role targets are checked against the roles it starts with.
		e.Roles = systems.StaticRoles(c.layout())
	}
	e.TTL, e.Interval, e.NodeTimeout = time.Duration(c.TTL), time.Duration(c.Interval), time.Duration(c.NodeTimeout)
	e.RestartDelay = time.Duration(c.RestartDelay)
	if k, err := locks.Lookup(c.Lock); err == nil {
		e.CrashPoints = k.CrashPoints
	}
	return e
}

// Workloads lists the workloads a run can drive.
func Workloads() []string { return []string{"mutex", "counter"} }

// resolveWorkload checks the workload and its guard.
func (c *Config) resolveWorkload() error {
	if c.Workload == "" {
		c.Workload = "mutex"
	}
	switch c.Workload {
	case "mutex":
		if c.Guard != "" && c.Guard != string(resource.GuardNone) {
			return fmt.Errorf("--guard %s needs a resource: use --workload counter", c.Guard)
		}
		c.Guard = ""
		return nil
	case "counter":
	default:
		return fmt.Errorf("--workload: unknown workload %q: use one of %s", c.Workload, strings.Join(Workloads(), ", "))
	}
	if c.Guard == "" {
		c.Guard = string(resource.GuardNone)
	}
	g, err := resource.ParseGuard(c.Guard)
	if err != nil {
		return fmt.Errorf("--guard: %w", err)
	}
	if k, err := c.kind(); g == resource.GuardFencing && (err != nil || !k.Tokens) {
		return fmt.Errorf("--guard fencing needs a lock that hands out fencing tokens, and --lock %s gives none: use --lock fenced, or --guard check-and-set", c.Lock)
	}
	return nil
}
