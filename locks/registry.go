package locks

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"

	"github.com/lockpick-dev/lockpick/clients"
)

// Kind describes one lock implementation: what it needs to run and how to build it. A new lock is
// one file with its implementation plus one entry in kinds.
type Kind struct {
	// Name is what --lock and scenario files call it.
	Name string
	// System is the system it runs on (systems.Names); Nodes the default number of masters on
	// redis-masters, zero elsewhere.
	System string
	Nodes  int
	// Tokens: the lock hands out fencing tokens, so a resource can guard with them.
	Tokens bool
	// Build makes one process's client over the endpoints of its client group.
	Build func(nodes []Endpoint, o Options) (Locker, error)
	// Open: the lock's leases have no deadline; a hold lasts until its release (watchdog locks).
	Open bool
	// NoExtend: the lock cannot renew a lease on request (--extend is refused).
	NoExtend bool
	// Reentrant: the owner may acquire a key it holds again (its leases report a depth), so a run
	// may enter it again inside a hold (--reentrant).
	Reentrant bool
	// WallClock: the lock runs inside lockpick and reads the client's wall clock through
	// Options.Clock, which the client-clock fault moves (as it moves a client program's through
	// the clock shim). Every other in-process lock reads Go's own clock, which no fault moves.
	WallClock bool
	// Program: the lock is a client program speaking the client protocol (docs/protocol.md), one
	// per process id. The one named ClientLock is the user's: it runs on any system, on any number
	// of nodes, with the capabilities the user declares (WithCapabilities).
	Program bool
	// Library is the Go package of a third-party library the lock adapts (its module and version,
	// from the binary's build info, name the library a run tested: LibraryOf); empty for the
	// built-in locks. A library promises its own validity, not the Redlock spec's drift allowance.
	Library string
	// WholeSeconds: the lock takes its TTL in whole seconds (go-zero's SetExpire, malkusch/lock's
	// timeout); another TTL is refused at configuration time.
	WholeSeconds bool
	// Probe builds the lease probe the nemesis aims with; nil means the Redis key probe (a lease is
	// one key holding its value on every data node).
	Probe func(nodes []Node) (ProbeCloser, error)
	// Majority: the lock grants on a majority of independent masters (Redlock), so it needs an odd
	// number of at least three of them.
	Majority bool
	// User: the user's own program (--client-cmd): it runs on any system and number of nodes, with
	// the capabilities the user declares.
	User bool
	// Breaks names the real bug the lock reproduces without any fault (docs/bugs.md): it grants a
	// held key by design of the library call it makes, so it is left out of the checks every
	// correct lock must pass.
	Breaks string
	// CrashPoints are the steps inside an acquire where client-crash may kill a process, besides
	// holding a lease (setnx-del's gap between SETNX and EXPIRE).
	CrashPoints []CrashPoint
}

// HasCrashPoint reports whether a client of the lock reaches point inside its acquire.
func (k Kind) HasCrashPoint(point CrashPoint) bool { return slices.Contains(k.CrashPoints, point) }

// kinds lists the built-in locks. Mutants are found by Lookup but are not listed here.
func kinds() []Kind {
	return []Kind{
		{Name: "single", System: "redis-masters", Nodes: 1, Build: func(n []Endpoint, o Options) (Locker, error) { return newSingle(n[0], o), nil }},
		{Name: "redlock", System: "redis-masters", Nodes: 5, Majority: true, Build: func(n []Endpoint, o Options) (Locker, error) { return newRedlock(n, o), nil }},
		{Name: "fenced", System: "redis-masters", Nodes: 1, Tokens: true, Build: func(n []Endpoint, o Options) (Locker, error) { return newFenced(n[0], o), nil }},
		{Name: "sentinel", System: "redis-sentinel", Build: func(n []Endpoint, o Options) (Locker, error) { return newSentinel(n, o, false, false) }},
		{Name: "sentinel-fenced", System: "redis-sentinel", Tokens: true, Build: func(n []Endpoint, o Options) (Locker, error) { return newSentinel(n, o, false, true) }},
		{Name: "watchdog", Reentrant: true, System: "redis-masters", Nodes: 1, Open: true, NoExtend: true, Probe: hashProbe, Build: func(n []Endpoint, o Options) (Locker, error) { return newWatchdog(n[0], o, false), nil }},
		{Name: "r2m", Reentrant: true, System: "redis-masters", Nodes: 1, Open: true, NoExtend: true, Probe: hashProbe, Build: func(n []Endpoint, o Options) (Locker, error) { return newWatchdog(n[0], o, true), nil }},
		{Name: "watchdog-sentinel", Reentrant: true, System: "redis-sentinel", Open: true, NoExtend: true, Probe: hashProbe, Build: func(n []Endpoint, o Options) (Locker, error) { return newWatchdogSentinel(n, o, false) }},
		{Name: "r2m-sentinel", Reentrant: true, System: "redis-sentinel", Open: true, NoExtend: true, Probe: hashProbe, Build: func(n []Endpoint, o Options) (Locker, error) { return newWatchdogSentinel(n, o, true) }},
		{Name: "setnx-getset", System: "redis-masters", Nodes: 1, NoExtend: true, WallClock: true, Build: func(n []Endpoint, o Options) (Locker, error) { return newSetnxGetset(n[0], o), nil }},
		{Name: "setnx-del", System: "redis-masters", Nodes: 1, NoExtend: true, WallClock: true, CrashPoints: []CrashPoint{CrashAfterSetNX}, Build: func(n []Endpoint, o Options) (Locker, error) { return newSetnxDel(n[0], o), nil }},
		{Name: "etcd", Library: modEtcdClient, System: "etcd", Tokens: true, NoExtend: true, Probe: etcdProbe, Build: newEtcd},
		{Name: "etcd-unlock-retry", Library: modEtcdClient, System: "etcd", Tokens: true, NoExtend: true, Probe: etcdProbe, Build: newEtcdUnlockRetry},
		{Name: "py-redis", System: "redis-masters", Nodes: 1, Program: true, Build: shipped(python, "python/redis_lock.py")},
		{Name: "py-tooz", System: "redis-masters", Nodes: 1, Program: true, Open: true, NoExtend: true, Probe: toozProbe, Build: shipped(python, "python/tooz_lock.py")},
		{Name: "php-malkusch", System: "redis-masters", Nodes: 5, Program: true, NoExtend: true, WholeSeconds: true, Probe: malkuschProbe, Build: shipped("php", "php/malkusch.php")},
		// ZooKeeper's lock recipes (clients/java/CuratorLock.java, clients/python/kazoo_lock.py): a
		// lease lasts as long as the session, and ends for the holder only through its connection
		// listener (SUSPENDED or LOST), so they are watchdog locks with the lock node's czxid as token.
		{Name: "curator", System: "zookeeper", Program: true, Open: true, NoExtend: true, Tokens: true, Probe: curatorProbe, Build: shippedJava("java/CuratorLock.java", clients.CuratorJars)},
		{Name: "go-zk", Library: "github.com/go-zookeeper/zk", System: "zookeeper", Open: true, NoExtend: true, Tokens: true, Probe: gozkProbe, Build: newGozk},
		{Name: "kazoo", System: "zookeeper", Program: true, Open: true, NoExtend: true, Tokens: true, Probe: kazooProbe, Build: shipped(python, "python/kazoo_lock.py")},
		{Name: ClientLock, System: "redis-masters", Nodes: 1, Program: true, User: true, NoExtend: true, Build: func(n []Endpoint, o Options) (Locker, error) { return newProgram(o.ClientCmd, n, o) }},
		// Third-party Go libraries, each through its own public API (redsync.go, redislock.go,
		// rueidislock.go, gozero.go).
		{Name: "redsync", Library: modRedsync, System: "redis-masters", Nodes: 5, Build: newRedsync},
		{Name: "redsync-1", Library: modRedsync, System: "redis-masters", Nodes: 1, Build: newRedsync},
		{Name: "bsm-redislock", Library: "github.com/bsm/redislock", System: "redis-masters", Nodes: 1, Build: func(n []Endpoint, o Options) (Locker, error) { return newBsmRedislock(n[0], o), nil }},
		{Name: "rueidislock", Library: "github.com/redis/rueidis/rueidislock", System: "redis-masters", Nodes: 1, Open: true, NoExtend: true, WallClock: true, Probe: rueidisProbe, Build: newRueidis},
		{Name: "go-zero", Library: modGoZero, System: "redis-masters", Nodes: 1, NoExtend: true, WholeSeconds: true, Build: func(n []Endpoint, o Options) (Locker, error) { return newGoZero(n[0], o, false) }},
		{Name: "go-zero-default", Library: modGoZero, System: "redis-masters", Nodes: 1, Open: true, NoExtend: true, Build: func(n []Endpoint, o Options) (Locker, error) { return newGoZero(n[0], o, true) }},
		// PostgreSQL through pgx (postgres.go): session and transaction advisory locks, whose leases
		// last while their session (transaction) does, and a lease table with fencing tokens.
		{Name: "pg-advisory", Library: modPgx, System: "postgres", Open: true, NoExtend: true, Probe: newPGProbe, Build: newPGAdvisorySession},
		{Name: "pg-advisory-xact", Library: modPgx, System: "postgres", Open: true, NoExtend: true, Probe: newPGProbe, Build: newPGAdvisoryXact},
		{Name: "pg-advisory-pgbouncer", Library: modPgx, System: "postgres", Open: true, NoExtend: true, Probe: newPGProbe, Build: newPGAdvisoryBouncer},
		{Name: "pg-advisory-pgbouncer-session", Library: modPgx, System: "postgres", Open: true, NoExtend: true, Probe: newPGProbe, Build: newPGAdvisoryBouncerSession},
		{Name: "pg-lease", Library: modPgx, System: "postgres", Tokens: true, Probe: newPGProbe, Build: newPGLease},
		// The catalogue of real bugs (docs/bugs.md): shipped libraries configured or renewed the way
		// their users do, each reproducing an upstream report.
		{Name: "py-redis-reacquire", Breaks: "redis-py#4279", System: "redis-masters", Nodes: 1, Program: true, Open: true, NoExtend: true, Build: shipped(python, "python/redis_reacquire.py")},
		{Name: "bsm-redislock-token", Breaks: "bsm/redislock#71", Library: "github.com/bsm/redislock", System: "redis-masters", Nodes: 1, Build: func(n []Endpoint, o Options) (Locker, error) { return newBsmRedislockToken(n[0], o) }},
		{Name: "go-zero-nested", Breaks: "go-zero#4319", Library: modGoZero, Reentrant: true, System: "redis-masters", Nodes: 1, NoExtend: true, WholeSeconds: true, Build: func(n []Endpoint, o Options) (Locker, error) { return newGoZeroNested(n[0], o) }},
		// Renewals that take a free key again after the lease ended: a holder stalled past its TTL is
		// told its lock is still its own (the counter workload with extend shows the lost update).
		{Name: "redsync-setnx-extend", Library: modRedsync, System: "redis-masters", Nodes: 5, Build: newRedsyncSetNX},
		{Name: "go-zero-keepalive", Library: modGoZero, System: "redis-masters", Nodes: 1, WholeSeconds: true, Build: func(n []Endpoint, o Options) (Locker, error) { return newGoZeroKeepalive(n[0], o) }},
		{Name: "sentinel-wait", System: "redis-sentinel", Build: func(n []Endpoint, o Options) (Locker, error) { return newSentinel(n, o, true, false) }},
	}
}

// DefaultLock is the lock a run tests when none is named.
const DefaultLock = "redlock"

// ClientLock is the lock that runs the user's client program (--lock client --client-cmd ...).
const ClientLock = "client"

// ClientCapabilities are the capabilities a client program may declare (docs/protocol.md).
var ClientCapabilities = []string{"validity", "token", "extend", "watchdog", "reentrant"}

// WithCapabilities is the client lock k with the capabilities caps its user declared: a watchdog
// library's leases last until release unless it also gives validity; extend allows --extend; token
// lets a resource guard with its fencing tokens; reentrant lets a holder enter it again. Each declared capability is checked against the
// program's init_ok.
func WithCapabilities(k Kind, caps []string) Kind {
	has := func(c string) bool { return slices.Contains(caps, c) }
	k.Open = has("watchdog") && !has("validity")
	k.NoExtend = !has("extend")
	k.Tokens = has("token")
	k.Reentrant = has("reentrant")
	build := k.Build
	k.Build = func(n []Endpoint, o Options) (Locker, error) {
		o.ClientCaps = caps
		return build(n, o)
	}
	return k
}

// python is the interpreter of the shipped Python clients: Debian's, whose modules (python3-redis,
// python3-tooz) a python3 earlier on PATH may lack.
const python = "/usr/bin/python3"

// shipped builds a shipped client program (package clients) run by interpreter.
func shipped(interpreter, file string) func([]Endpoint, Options) (Locker, error) {
	return func(n []Endpoint, o Options) (Locker, error) {
		path, err := clients.Install(filepath.Join(o.ClientDir, "programs"), file)
		if err != nil {
			return nil, err
		}
		return newProgram([]string{interpreter, path}, n, o)
	}
}

// shippedJava builds a shipped Java client program, compiled by the machine's JDK at first use
// into the user cache (clients.JavaCommand) against jars.
func shippedJava(file string, jars []clients.Jar) func([]Endpoint, Options) (Locker, error) {
	return func(n []Endpoint, o Options) (Locker, error) {
		command, err := clients.JavaCommand(context.Background(), "", file, jars)
		if err != nil {
			return nil, err
		}
		return newProgram(command, n, o)
	}
}

// Modules of the libraries adapted by more than one lock.
const (
	modRedsync = "github.com/go-redsync/redsync/v4"
	modGoZero  = "github.com/zeromicro/go-zero/core/stores/redis"
	// modPgx is the PostgreSQL driver of the postgres locks.
	modPgx = "github.com/jackc/pgx/v5"
	// modEtcdClient is etcd's Go client, whose concurrency.Mutex the etcd locks use.
	modEtcdClient = "go.etcd.io/etcd/client/v3/concurrency"
)

// Lookup finds a lock by name: a built-in lock, or a self-test mutant, which runs on the system of
// the lock it breaks.
func Lookup(name string) (Kind, error) {
	for _, k := range kinds() {
		if k.Name == name {
			return k, nil
		}
	}
	if m, ok := mutant(name); ok {
		base, err := Lookup(m.Base)
		if err != nil {
			return Kind{}, err
		}
		base.Name = name
		base.WallClock = m.readsWallClock()
		base.CrashPoints = nil // a mutant's acquire is its own, without the base's inner steps
		base.Build = func(n []Endpoint, o Options) (Locker, error) { return m.build(n, o), nil }
		return base, nil
	}
	return Kind{}, fmt.Errorf("unknown lock %q: use one of %v", name, Names())
}

// ClientClockReaches reports whether the client-clock fault moves a clock the lock reads: a client
// program's (the clock shim) or Options.Clock (WallClock).
func (k Kind) ClientClockReaches() bool { return k.Program || k.WallClock }

// Names lists the built-in locks, sorted.
func Names() []string {
	var names []string
	for _, k := range kinds() {
		names = append(names, k.Name)
	}
	sort.Strings(names)
	return names
}

// Probes of libraries that store a lease of KEY under a name of their own. Without them the probe,
// and so every nemesis aimed by lock state (holder targets, a quiet clock reset), would see no
// lease of these locks at all.

// malkuschProbe: malkusch/lock keeps KEY as lock_KEY.
func malkuschProbe(nodes []Node) (ProbeCloser, error) {
	return renamedKeyProbe(nodes, func(k string) string { return "lock_" + k })
}

// toozProbe: tooz names its lock "%s_%s_lock" % (namespace, str(name)) with both in bytes, so
// Python 3 formats their reprs: b'_tooz'_b'KEY'_lock.
func toozProbe(nodes []Node) (ProbeCloser, error) {
	return renamedKeyProbe(nodes, func(k string) string { return "b'_tooz'_b'" + k + "'_lock" })
}

// renamedKeyProbe is the key probe of a lock that stores a lease of KEY under name(KEY).
func renamedKeyProbe(nodes []Node, name func(string) string) (ProbeCloser, error) {
	p, err := newKeyProbe(nodes)
	if err != nil {
		return nil, err
	}
	p.keyName = name
	return p, nil
}
