package nemesis

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockpick-dev/lockpick/links"
	"github.com/lockpick-dev/lockpick/systems"
)

// Spec names a nemesis and its parameters. Its text form, used by --nemesis and stored in
// config.json, is "name:key=value:key=value"; several specs are joined by commas.
type Spec struct {
	Name   string            `json:"name"`
	Params map[string]string `json:"params,omitempty"`
}

// String is the canonical text form: parameters sorted by key.
func (s Spec) String() string {
	var b strings.Builder
	b.WriteString(s.Name)
	for _, k := range slices.Sorted(maps.Keys(s.Params)) {
		fmt.Fprintf(&b, ":%s=%s", k, s.Params[k])
	}
	return b.String()
}

// ParseSpec reads one spec, "clock:target=majority:jump=forward".
func ParseSpec(text string) (Spec, error) {
	parts := strings.Split(strings.TrimSpace(text), ":")
	s := Spec{Name: parts[0]}
	if s.Name == "" {
		return s, fmt.Errorf("empty nemesis name in %q: use one of %s", text, strings.Join(Names(), ", "))
	}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" || v == "" {
			return s, fmt.Errorf("nemesis %s: parameter %q is not key=value (for example %s:interval=5s)", s.Name, p, s.Name)
		}
		if s.Params == nil {
			s.Params = map[string]string{}
		}
		if _, dup := s.Params[k]; dup {
			return s, fmt.Errorf("nemesis %s: parameter %q given twice", s.Name, k)
		}
		s.Params[k] = v
	}
	return s, nil
}

// ParseSpecs reads a comma-separated list of specs. "none" alone is the empty list.
func ParseSpecs(text string) ([]Spec, error) {
	var specs []Spec
	seen := map[string]bool{}
	for _, part := range strings.Split(text, ",") {
		s, err := ParseSpec(part)
		if err != nil {
			return nil, err
		}
		if err := Validate(s.Name); err != nil {
			return nil, err
		}
		if s.Name == "none" {
			if len(s.Params) > 0 {
				return nil, fmt.Errorf("nemesis none takes no parameters")
			}
			continue
		}
		// Each nemesis draws its schedule from the run seed and its name, so two of one kind would
		// share a schedule; and two of one kind would fight over the same faults.
		if seen[s.Name] {
			return nil, fmt.Errorf("nemesis %s given twice: give it once, with the parameters you want", s.Name)
		}
		seen[s.Name] = true
		specs = append(specs, s)
	}
	return specs, nil
}

// JoinSpecs is the text form of a list of specs, "none" when empty.
func JoinSpecs(specs []Spec) string {
	if len(specs) == 0 {
		return "none"
	}
	parts := make([]string, len(specs))
	for i, s := range specs {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",")
}

// Slug turns the text form of specs into a piece of a run directory's name:
// "partition:kind=bridge,clock" becomes "partition-kind-bridge+clock".
func Slug(text string) string {
	return strings.NewReplacer(",", "+", ":", "-", "=", "-").Replace(text)
}

// Params reads a spec's parameters, checks them, and remembers which it read, so that a parameter
// nobody reads is reported as unknown instead of being silently ignored.
type Params struct {
	spec Spec
	used map[string]bool
	errs []string
	// types and allowed are how each parameter was read, for the test that holds every kind's
	// parameter table to what its builder reads.
	types   map[string]ParamType
	allowed map[string][]string
}

// NewParams starts reading spec's parameters.
func NewParams(spec Spec) *Params {
	return &Params{spec: spec, used: map[string]bool{}, types: map[string]ParamType{}, allowed: map[string][]string{}}
}

func (p *Params) get(key string) (string, bool) {
	p.used[key] = true
	v, ok := p.spec.Params[key]
	return v, ok
}

func (p *Params) fail(format string, args ...any) {
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
}

// Duration reads a duration ("1.5s"); def when absent.
func (p *Params) Duration(key string, def time.Duration) time.Duration {
	p.types[key] = TypeDuration
	v, ok := p.get(key)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		p.fail("%s=%s is not a duration: use a value like %s=2s", key, v, key)
		return def
	}
	return d
}

// Share reads a number in [0, 1]; def when absent.
func (p *Params) Share(key string, def float64) float64 {
	p.types[key] = TypeShare
	v, ok := p.get(key)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1 {
		p.fail("%s=%s is not a share between 0 and 1", key, v)
		return def
	}
	return f
}

// Choice reads one of allowed; def when absent.
func (p *Params) Choice(key, def string, allowed ...string) string {
	p.types[key] = TypeChoice
	p.allowed[key] = allowed
	v, ok := p.get(key)
	if !ok {
		return def
	}
	if !slices.Contains(allowed, v) {
		p.fail("%s=%s is not allowed: use one of %s", key, v, strings.Join(allowed, ", "))
		return def
	}
	return v
}

// Choices reads a list of allowed values separated by "+", for example kind=isolate+bridge; def when
// absent.
func (p *Params) Choices(key string, def []string, allowed ...string) []string {
	p.types[key] = TypeChoices
	p.allowed[key] = allowed
	v, ok := p.get(key)
	if !ok {
		return def
	}
	var out []string
	for _, c := range strings.Split(v, "+") {
		if !slices.Contains(allowed, c) {
			p.fail("%s=%s: %q is not allowed: use one or more of %s, joined by +", key, v, c, strings.Join(allowed, ", "))
			return def
		}
		out = append(out, c)
	}
	return out
}

// NamedDuration reads a duration or one of the names in named; def when absent.
func (p *Params) NamedDuration(key string, def time.Duration, named map[string]time.Duration) time.Duration {
	p.types[key] = TypeDuration
	p.allowed[key] = sortedKeys(named)
	v, ok := p.get(key)
	if !ok {
		return def
	}
	if d, ok := named[v]; ok {
		return d
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		p.fail("%s=%s is not allowed: use one of %s, or a duration like %s=3s", key, v, strings.Join(sortedKeys(named), ", "), key)
		return def
	}
	return d
}

// Err reports every bad value and every parameter the nemesis did not read.
func (p *Params) Err() error {
	errs := slices.Clone(p.errs)
	known := slices.Sorted(maps.Keys(p.used))
	for _, k := range slices.Sorted(maps.Keys(p.spec.Params)) {
		if !p.used[k] {
			errs = append(errs, fmt.Sprintf("unknown parameter %q: %s takes %s", k, p.spec.Name, strings.Join(known, ", ")))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("nemesis %s: %s", p.spec.Name, strings.Join(errs, "; "))
}

// Cluster is what nemeses drive on the nodes.
type Cluster interface {
	Processes
	Signal(node string, sig syscall.Signal) error
	// Pid is a running node's process id in its host (this machine's for --backend local), 0 when
	// the node is down.
	Pid(node string) int
}

// Clocks moves the wall clocks of nodes (the LD_PRELOAD shim) and measures them.
type Clocks interface {
	// SetClockOffset shifts a node's wall clock by offset from the real time.
	SetClockOffset(node string, offset time.Duration) error
	// ClockOffset measures a node's offset: its TIME against the harness clock.
	ClockOffset(node string) (time.Duration, error)
}

// RealClocks moves the real clocks of the hosts the nodes run on (the ssh backend): SetClockOffset
// steps a node's host clock to offset from where it would be without the faults, ClockOffset says
// how far it is now, by the host's record of what was done.
type RealClocks interface {
	Clocks
	// SetClockRate makes a node's host clock run fast by rate from now (0: at the frequency it had),
	// adding to its offset as it runs.
	SetClockRate(node string, rate float64) error
	// Kin are the nodes whose hosts share node's kernel, node among them: their clocks are one.
	Kin(node string) []string
}

// RoleView reports the role of every node now (a systems.System is one).
type RoleView interface {
	Roles() map[string]systems.Role
}

// WriteHolder holds back client writes on a node while f runs (a systems.System is one).
type WriteHolder interface {
	HoldWrites(ctx context.Context, node string, max time.Duration, f func(ctx context.Context) error) error
}

// WriteStepper is a WriteHolder whose hold f may also step: let the writes held back so far run, and
// hold again what arrives after (a systems.System on redis-sentinel is one).
type WriteStepper interface {
	HoldWritesStepping(ctx context.Context, node string, max time.Duration, f func(ctx context.Context, step func(context.Context) error) error) error
}

// Env is what the harness gives nemeses: the system's nodes, their roles and links, the lock's
// lease probe, and the run's timing. Nothing here is particular to a server family.
type Env struct {
	Cluster Cluster
	// Net cuts nodes' own network interfaces; nil when the backend cannot (local nodes share the
	// loopback interface) or the system is not running yet (the harness checks the capability
	// before: Offered).
	Net NetCutter
	// Peers cuts the paths between servers where the servers run (the docker backend's rules in
	// their namespaces); nil when those paths are links (local), or before the system runs.
	Peers systems.PeerCutter
	// Slow slows the paths between servers where the servers run (the docker backend: a packet
	// queue per path); nil where those paths are links, or before the system runs.
	Slow systems.PeerSlower
	// Clocks is nil when the nodes run without the clock shim.
	Clocks Clocks
	// HostClocks is nil unless the hosts' real clocks may move (--backend ssh, --allow-host-clock).
	HostClocks RealClocks
	// Nodes are the nodes the count targets (one, minority, majority, all) draw from and the
	// partition and latency nemeses cut clients from: the nodes that store the lock's data.
	Nodes []string
	Links *links.Set
	// Groups are the client groups, c1..cG; every group has a link to every node.
	Groups []string
	// Roles reports the nodes' roles now; nil when the configuration is checked without a system
	// (role targets are then refused).
	Roles RoleView
	// Probe is the lock's lease probe; nil refuses lock-aware targets.
	Probe systems.LeaseProbe
	// Holders reports which processes hold a lock now and through which client group, for the
	// partitions that aim at the holder's group; nil before the run.
	Holders HolderView
	// Sessions ends client sessions on a node (the terminate nemesis); nil when the system has none.
	Sessions systems.SessionEnder
	// Promoter promotes a replica where no sentinel does (postgres); nil elsewhere.
	Promoter systems.Promoter
	// Writes holds writes back on a node (the clock nemesis's quiet reset, the failover's stall);
	// nil when unavailable.
	Writes WriteHolder
	// Keys are the lock keys the workload contends for.
	Keys []string
	// Clients pauses client processes; nil when the workload cannot (the mutex workload, or a
	// configuration being checked before the run).
	Clients ClientPauser
	// Crashes kills client processes at crash points; ClientClocks moves their wall clocks. Nil when
	// the configuration is checked before the run.
	Crashes      ClientCrasher
	ClientClocks ClientClocks
	// CrashPoints are the steps inside the lock's acquire that its clients reach (setnx-del's gap
	// between SETNX and EXPIRE); a crash aimed at another step would never happen.
	CrashPoints []string

	TTL         time.Duration
	Interval    time.Duration
	NodeTimeout time.Duration
	// RestartDelay is the default time restart-delayed keeps a node down.
	RestartDelay time.Duration

	Recorder Recorder
	Log      *slog.Logger
}

type builder func(env Env, p *Params) (Nemesis, error)
