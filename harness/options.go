package harness

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/nemesis"
	"github.com/lockpick-dev/lockpick/resource"
	"github.com/lockpick-dev/lockpick/systems"
)

// Option is one setting of a run, spelt once: the Config field it sets, its flag, its key in a
// scenario file, its default and help, the commands that take it, and its values where they are a
// fixed set. Flags and scenario files both decode through it, and --help, completion and the docs'
// list of flags are made from it, so a new option is one row of Options.
type Option struct {
	// Name is the flag without its dashes: time-limit.
	Name string
	// Key is the option's field in a scenario file (time_limit); empty when a file cannot set it,
	// and then NoKey says why.
	Key, NoKey string
	// Default is the value, as text, of a run that does not set the option; empty is the field's
	// zero value, which Resolve fills in when it means "the default".
	Default string
	// Help is the flag's usage line.
	Help string
	// Commands are the commands that take the option as a flag: run, card, matrix.
	Commands []string
	// WithFile marks an option that may change a scenario file's run without changing what it
	// tests (scenario, and run FILE): where it runs, how long, which seed.
	WithFile bool
	// Positive refuses an explicit zero: in a Config zero means "the default", so a zero given
	// would silently become the default.
	Positive bool
	// Required is an option a scenario file must set.
	Required bool
	// Values, where set, are the values the option takes, for completion.
	Values func() []string
	// Words splits a list at spaces (a command and its arguments) rather than at commas.
	Words bool
	// Bare is the value of the flag given without one (--allow-host-clock); empty: a value is needed.
	Bare string
	// field points at the Config field the option sets.
	field func(*Config) any
}

const (
	cmdRun    = "run"
	cmdCard   = "card"
	cmdMatrix = "matrix"
)

var (
	runOnly     = []string{cmdRun}
	runMatrix   = []string{cmdRun, cmdMatrix}
	runCard     = []string{cmdRun, cmdCard}
	allCommands = []string{cmdRun, cmdCard, cmdMatrix}
)

// Options is the table of a run's options, in the order --help lists them.
func Options() []Option {
	return []Option{
		{Name: "lock", Key: "lock", Required: true, Default: locks.DefaultLock, Commands: runOnly, Values: locks.Names,
			Help: fmt.Sprintf("lock under test: %v", locks.Names()), field: func(c *Config) any { return &c.Lock }},
		{Name: "client-cmd", NoKey: "a scenario file gives it in its client block (client: {command: ...})", Commands: allCommands, Words: true,
			Help: "the program of --lock client and its arguments, split at spaces (it speaks the client protocol: docs/protocol.md)", field: func(c *Config) any { return &c.ClientCmd }},
		{Name: "client-capabilities", NoKey: "a scenario file gives them in its client block (client: {capabilities: [...]})", Commands: allCommands,
			Help: fmt.Sprintf("what the program of --lock client offers, comma-separated: %v", locks.ClientCapabilities), field: func(c *Config) any { return &c.ClientCaps }},
		{Name: "system", Key: "system", Commands: runCard, Values: systems.Names,
			Help: fmt.Sprintf("system the lock runs on: %v (default the one the lock needs)", systems.Names()), field: func(c *Config) any { return &c.System }},
		{Name: "nodes", Key: "nodes", Positive: true, Commands: allCommands,
			Help: "masters of redis-masters, members of etcd (default 5 for redlock, 1 for single and fenced, 3 etcd members; redlock takes an odd number of at least 3)", field: func(c *Config) any { return &c.Nodes }},
		{Name: "replicas", Key: "replicas", Positive: true, Commands: runCard,
			Help: "replicas of the primary on redis-sentinel (--lock sentinel, sentinel-wait; default 2) and streaming replicas on postgres (0 or 1; default 0)", field: func(c *Config) any { return &c.Replicas }},
		{Name: "synchronous", Key: "synchronous", Commands: runCard,
			Help: "postgres: replicate synchronously (synchronous_standby_names: a commit returns once the replica flushed it); needs --replicas 1", field: func(c *Config) any { return &c.Synchronous }},
		{Name: "sentinels", Key: "sentinels", Positive: true, Commands: runCard,
			Help: "sentinels of redis-sentinel, quorum a majority of them (default 3)", field: func(c *Config) any { return &c.Sentinels }},
		{Name: "allow-even-nodes", Key: "allow_even_nodes", Commands: runCard,
			Help: "let redlock run on an even number of nodes", field: func(c *Config) any { return &c.AllowEvenNodes }},
		{Name: "redis-server", NoKey: "a program of this host, not part of what a scenario tests", Commands: runCard,
			Help: "redis-server binary (default: from PATH)", field: func(c *Config) any { return &c.RedisServer }},
		{Name: "etcd-server", Key: "etcd_server", Commands: runCard, WithFile: true,
			Help:  `etcd program of the etcd system: "system" (etcd on PATH, Debian's etcd-server), "current" (etcd ` + systems.EtcdCurrentVersion + ` built from the Go module proxy once and cached), or a path`,
			field: func(c *Config) any { return &c.EtcdServer }},
		{Name: "clock-shim", NoKey: "a library of this host, not part of what a scenario tests", Commands: runCard,
			Help: "clock shim library for the clock nemesis (default: libclockshim.so beside lockpick, else built from source with cc)", field: func(c *Config) any { return &c.ClockShim }},
		{Name: "nemesis", Key: "nemeses", Default: "none", Commands: runOnly,
			Help: fmt.Sprintf("faults to inject, NAME[:key=value...] joined by commas (--nemesis help describes each, its parameters and what it needs): %v", nemesis.Names()), field: func(c *Config) any { return &c.Nemesis }},
		{Name: "workload", Key: "workload", Default: "mutex", Commands: runMatrix, Values: Workloads,
			Help: "what the clients do: mutex (acquire, hold, release) or counter (read-modify-write of a counter on a separate resource node)", field: func(c *Config) any { return &c.Workload }},
		{Name: "guard", Key: "guard", Commands: runMatrix, Values: guardNames,
			Help: "how the counter's resource checks writes: none, fencing (needs --lock fenced) or check-and-set (default none)", field: func(c *Config) any { return &c.Guard }},
		{Name: "name", NoKey: "a scenario's name is its own name: field", Commands: runOnly,
			Help: "name of the run in the store (default LOCK-NEMESIS)", field: func(c *Config) any { return &c.Name }},
		{Name: "persistence", Key: "persistence", Default: "none", Commands: runMatrix, Values: persistenceNames,
			Help: "node persistence: none, aof-everysec, aof-always", field: func(c *Config) any { return &c.Persistence }},
		{Name: "clients", Key: "clients", Required: true, Default: "10", Commands: runMatrix,
			Help: fmt.Sprintf("concurrent client processes (at most %d)", MaxClients), field: func(c *Config) any { return &c.Clients }},
		{Name: "client-groups", Key: "client_groups", Positive: true, Default: "1", Commands: runMatrix,
			Help: "client groups, each with its own link to every node", field: func(c *Config) any { return &c.ClientGroups }},
		{Name: "keys", Key: "keys", Default: "1", Commands: runMatrix,
			Help: "lock keys the clients contend for", field: func(c *Config) any { return &c.Keys }},
		{Name: "ttl", Key: "ttl", Required: true, Default: "2s", Commands: runMatrix,
			Help: "lease TTL each acquire asks for", field: func(c *Config) any { return &c.TTL }},
		{Name: "time-limit", Key: "time_limit", Required: true, Default: "30s", Commands: runMatrix, WithFile: true,
			Help: "length of the fault phase", field: func(c *Config) any { return &c.TimeLimit }},
		{Name: "recovery", Key: "recovery", Default: "5s", Commands: runMatrix,
			Help: "fault-free phase after the final heal", field: func(c *Config) any { return &c.Recovery }},
		{Name: "interval", Key: "interval", Positive: true, Default: "5s", Commands: runMatrix,
			Help: "mean time between faults", field: func(c *Config) any { return &c.Interval }},
		{Name: "restart-delay", Key: "restart_delay", Positive: true, Commands: runMatrix,
			Help: "how long restart-delayed keeps a node down (default 1.5 x TTL)", field: func(c *Config) any { return &c.RestartDelay }},
		{Name: "node-timeout", Key: "node_timeout", Positive: true, Commands: runMatrix,
			Help: "timeout of each lock request to one node (default TTL/4 within 50ms..2s); raise it when the run warns of overload", field: func(c *Config) any { return &c.NodeTimeout }},
		{Name: "hold-max", Key: "hold_max", Positive: true, Commands: runMatrix,
			Help: "draw holds uniformly up to this, mutex workload (default: across each lease's validity, 60% in [0, v/2], 30% in [0.8v, v), 10% in [v, 1.2v)); past the validity a holder overruns, and the checker reports it", field: func(c *Config) any { return &c.HoldMax }},
		{Name: "hold-min", Key: "hold_min", Positive: true, Commands: runMatrix,
			Help: "with --hold-max, draw holds uniformly from [hold-min, hold-max]: a failover run's holds then all outlive the promotion", field: func(c *Config) any { return &c.HoldMin }},
		{Name: "careful", Key: "careful", Commands: runMatrix,
			Help: "mutex holders check their remaining validity and never plan work past their deadline", field: func(c *Config) any { return &c.Careful }},
		{Name: "extend", Key: "extend", Commands: runMatrix,
			Help: "mutex holders renew their leases (Extend) for work up to three validities long; counter holders renew once between read and write and write only if that renewal is ok", field: func(c *Config) any { return &c.Extend }},
		{Name: "stop-at-first", NoKey: "how far to run, not what a scenario tests: given with a file, it applies when the file expects violations and nothing else", Commands: runOnly, WithFile: true,
			Help: "end the fault phase at the first violation (then heal, recover and check the whole history); with a scenario file, only when the file expects violations and nothing else", field: func(c *Config) any { return &c.StopAtFirst }},
		{Name: "reentrant", Key: "reentrant", Commands: runOnly,
			Help: "mutex holders of a reentrant lock (watchdog, r2m) enter it again inside their hold; refused clients now and then unlock a key they do not hold, which the lock must refuse", field: func(c *Config) any { return &c.Reentrant }},
		{Name: "watchdog-timeout", Key: "watchdog_timeout", Positive: true, Commands: runOnly,
			Help: "lease time of watchdog locks (watchdog, r2m), renewed every third of it (default: --ttl)", field: func(c *Config) any { return &c.WatchdogTimeout }},
		{Name: "think-max", Key: "think_max", Positive: true, Commands: runMatrix,
			Help: "longest pause of a client between its operations (default 20ms per client per key)", field: func(c *Config) any { return &c.ThinkMax }},
		{Name: "check-timeout", Key: "check_timeout", Positive: true, Default: "2m0s", Commands: runOnly,
			Help: "time the checker may take before the verdict is unknown", field: func(c *Config) any { return &c.CheckTimeout }},
		{Name: "seed", Key: "seed", Commands: runOnly, WithFile: true,
			Help: "seed of the fault schedule and the workload (default random, printed)", field: func(c *Config) any { return &c.Seed }},
		{Name: "store", NoKey: "where runs are kept is the caller's, not the scenario's", Default: "store", Commands: allCommands, WithFile: true,
			Help: "directory of the run store", field: func(c *Config) any { return &c.Store }},
		{Name: "base-port", NoKey: "ports are this host's, not part of what a scenario tests", Commands: runOnly,
			Help: "first port of the nodes (default: free ports)", field: func(c *Config) any { return &c.BasePort }},
		{Name: "backend", Key: "backend", Default: systems.BackendLocal, Commands: runOnly, WithFile: true, Values: systems.Backends,
			Help: fmt.Sprintf("who runs the nodes: %v (docker: containers on a private bridge network; external: --endpoints someone else runs)", systems.Backends()), field: func(c *Config) any { return &c.Backend }},
		{Name: "docker-host", NoKey: "an Engine of the caller's, not part of what a scenario tests", Commands: runOnly, WithFile: true,
			Help: "Docker Engine of --backend docker (default: DOCKER_HOST, else the local socket)", field: func(c *Config) any { return &c.DockerHost }},
		{Name: "docker-publish-host", NoKey: "an address of the caller's network, not part of what a scenario tests", Commands: runOnly, WithFile: true,
			Help:  "with a remote --docker-host: the address at which this host reaches the ports that Engine publishes for the nodes (default: the host of --docker-host; set it when the Engine is reached through a tunnel)",
			field: func(c *Config) any { return &c.DockerPublishHost }},
		{Name: "hosts", Key: "hosts", Commands: runOnly, WithFile: true,
			Help: "hosts of --backend ssh, HOST[:SSHPORT][,HOST...]: the nodes run there, placed round-robin (docs/ssh.md)", field: func(c *Config) any { return &c.SSHHosts }},
		{Name: "ssh-user", Key: "ssh_user", Commands: runOnly, WithFile: true,
			Help: "user --backend ssh logs in as on the hosts (default root: cuts are iptables rules)", field: func(c *Config) any { return &c.SSHUser }},
		{Name: "ssh-key", Key: "ssh_key", Commands: runOnly, WithFile: true,
			Help: "private key --backend ssh logs in with, without a passphrase (default ~/.ssh/id_ed25519, id_ecdsa or id_rsa)", field: func(c *Config) any { return &c.SSHKey }},
		{Name: "ssh-known-hosts", Key: "ssh_known_hosts", Commands: runOnly, WithFile: true,
			Help: "known_hosts file that must list every host's key, for --backend ssh (default ~/.ssh/known_hosts; a host key is never accepted unseen)", field: func(c *Config) any { return &c.SSHKnownHosts }},
		{Name: "ssh-fingerprint", Key: "ssh_fingerprint", Commands: runOnly, WithFile: true,
			Help: "instead of --ssh-known-hosts: each host's key fingerprint (SHA256:..., as ssh-keygen -lf prints it), comma-separated in the order of --hosts", field: func(c *Config) any { return &c.SSHFingerprints }},
		{Name: "allow-host-clock", NoKey: "moving the hosts' real clocks is the caller's to allow, never a scenario file's", Commands: runOnly, WithFile: true, Bare: systems.HostClockOwn,
			Values: func() []string { return []string{systems.HostClockOwn, systems.HostClockShared} },
			Help:   "let clock:source=host step and slew the real clocks of the --hosts of --backend ssh, as root (restored at the end and by lockpick clean; docs/ssh.md); =shared also where hosts share a kernel with each other or this machine, whose clock then moves too", field: func(c *Config) any { return &c.AllowHostClock }},
		{Name: "endpoints", NoKey: "servers of the caller's, not part of what a scenario tests", Commands: runOnly,
			Help: "servers of --backend external, host:port[,host:port...]: redis masters someone else runs (one for single, fenced and watchdog locks, an odd number for redlock)", field: func(c *Config) any { return &c.Endpoints }},
		{Name: "master-name", NoKey: "belongs with --endpoints, which a scenario does not set", Commands: runOnly,
			Help: "with --backend external and a sentinel lock: the name the --endpoints (sentinels) monitor the primary under", field: func(c *Config) any { return &c.MasterName }},
	}
}

// LookupOption returns the option with the given flag name.
func LookupOption(name string) (Option, bool) {
	i := slices.IndexFunc(Options(), func(o Option) bool { return o.Name == name })
	if i < 0 {
		return Option{}, false
	}
	return Options()[i], true
}

// OptionByKey returns the option a scenario file's key sets.
func OptionByKey(key string) (Option, bool) {
	i := slices.IndexFunc(Options(), func(o Option) bool { return o.Key != "" && o.Key == key })
	if i < 0 {
		return Option{}, false
	}
	return Options()[i], true
}

// TakenBy reports whether command takes the option as a flag.
func (o Option) TakenBy(command string) bool { return slices.Contains(o.Commands, command) }

// Defaults is a Config with every option at its default: what a run that sets nothing gets.
func Defaults() Config {
	var c Config
	for _, o := range Options() {
		if o.Default != "" {
			// A default that did not parse would stay zero; TestOptionDefaultsRoundTrip keeps every
			// row's default parseable.
			_ = o.Value(&c).Set(o.Default)
		}
	}
	return c
}

// ErrZero is the error of a Positive option given zero.
var ErrZero = errors.New("zero means the default here")

// Value is the option's field in c as a flag value (pflag.Value): text in, text out.
func (o Option) Value(c *Config) *OptionValue { return &OptionValue{opt: o, ptr: o.field(c)} }

// Kind is the option's type in a word, as --help shows it.
func (o Option) Kind() string { return (&OptionValue{opt: o, ptr: o.field(&Config{})}).Type() }

// OptionValue is an option's field read and written as text.
type OptionValue struct {
	opt Option
	ptr any
}

// String returns the field's value as text.
func (v *OptionValue) String() string {
	switch p := v.ptr.(type) {
	case *string:
		return *p
	case *int:
		return strconv.Itoa(*p)
	case *uint64:
		return strconv.FormatUint(*p, 10)
	case *bool:
		return strconv.FormatBool(*p)
	case *Duration:
		return time.Duration(*p).String()
	case *[]string:
		if v.opt.Words {
			return strings.Join(*p, " ")
		}
		return strings.Join(*p, ",")
	}
	return ""
}

// Set parses s into the field. Its errors say what is wanted, for the caller to prefix with the
// option's spelling.
func (v *OptionValue) Set(s string) error {
	switch p := v.ptr.(type) {
	case *string:
		*p = s
	case *int:
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return errors.New("must be a whole number")
		}
		if v.opt.Positive && n == 0 {
			return ErrZero
		}
		*p = n
	case *uint64:
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return errors.New("must be a whole number of at least 0")
		}
		*p = n
	case *bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("must be true or false")
		}
		*p = b
	case *Duration:
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return errors.New("must be a duration such as 2s or 500ms")
		}
		if v.opt.Positive && d == 0 {
			return ErrZero
		}
		*p = Duration(d)
	case *[]string:
		*p = splitList(s)
		if v.opt.Words {
			*p = strings.Fields(s)
		}
		if len(*p) == 0 {
			*p = nil // nothing given is no list, as an unset field
		}
	}
	return nil
}

// Type names the value's kind for --help.
func (v *OptionValue) Type() string {
	switch v.ptr.(type) {
	case *int:
		return "int"
	case *uint64:
		return "uint"
	case *bool:
		return "bool"
	case *Duration:
		return "duration"
	case *[]string:
		if v.opt.Words {
			return "command"
		}
		return "strings"
	}
	return "string"
}

// IsBoolFlag lets a bool option be given as a bare --flag.
func (v *OptionValue) IsBoolFlag() bool {
	_, ok := v.ptr.(*bool)
	return ok
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// CopyOption sets the option named name in dst to its value in src.
func CopyOption(name string, dst, src *Config) error {
	o, ok := LookupOption(name)
	if !ok {
		return fmt.Errorf("no option %q", name)
	}
	return o.Value(dst).Set(o.Value(src).String())
}

func guardNames() []string {
	var out []string
	for _, g := range resource.Guards() {
		out = append(out, string(g))
	}
	return out
}

func persistenceNames() []string {
	return []string{string(systems.PersistNone), string(systems.PersistAOFEverysec), string(systems.PersistAOFAlways)}
}

// Spelling is how the user gave a run's options: flags on a command line, or the keys of scenario
// file File. Errors name each option as the user spelt it, so that their advice can be typed.
type Spelling struct {
	// File is the scenario file the options came from; empty means flags.
	File string
}

// Name is the option called name (its flag without dashes) as the user spells it: --time-limit,
// or time_limit in a file. An option a file cannot set came from a flag, and keeps its flag.
func (s Spelling) Name(name string) string {
	if o, ok := LookupOption(name); ok && s.File != "" && o.Key != "" {
		return o.Key
	}
	return "--" + name
}

// Set is the option set to value as the user would type it: --ttl 2s (a bool: --extend), or
// ttl: 2s in a file.
func (s Spelling) Set(name, value string) string {
	o, ok := LookupOption(name)
	if ok && s.File != "" && o.Key != "" {
		return o.Key + ": " + value
	}
	if ok && o.Kind() == "bool" && value == "true" {
		return "--" + name
	}
	return "--" + name + " " + value
}

// Respell rewrites the flags named in err into s's spelling. It serves the checks whose messages
// still name flags literally (resolveNodes, resolveHold, the backend's and the client's checks):
// once they name options through Spelling, it has nothing left to do.
func (s Spelling) Respell(err error) error {
	if err == nil || s.File == "" {
		return err
	}
	msg := err.Error()
	var b strings.Builder
	for {
		i := strings.Index(msg, "--")
		if i < 0 {
			b.WriteString(msg)
			break
		}
		j := i + 2
		for j < len(msg) && (msg[j] >= 'a' && msg[j] <= 'z' || msg[j] == '-') {
			j++
		}
		b.WriteString(msg[:i])
		b.WriteString(s.Name(msg[i+2 : j]))
		msg = msg[j:]
	}
	return respelt{b.String(), err}
}

// respelt is an error whose text Respell rewrote; it still unwraps to the original.
type respelt struct {
	msg string
	err error
}

func (r respelt) Error() string { return r.msg }
func (r respelt) Unwrap() error { return r.err }

// Nearest is the name closest to typed within an edit distance of 2 (a typo), or one that typed
// begins (three letters at least); empty when none is. It makes the "did you mean" of flags and
// scenario fields.
func Nearest(typed string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		d := editDistance(typed, n)
		if len(typed) >= 3 && strings.HasPrefix(n, typed) {
			d = min(d, 2)
		}
		if d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
