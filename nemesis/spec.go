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
	// allowed are the values of the parameters read with Choice or Choices, for ParamValues.
	allowed map[string][]string
}

// NewParams starts reading spec's parameters.
func NewParams(spec Spec) *Params {
	return &Params{spec: spec, used: map[string]bool{}, allowed: map[string][]string{}}
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

// Int reads an integer; def when absent.
func (p *Params) Int(key string, def int) int {
	v, ok := p.get(key)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		p.fail("%s=%s is not an integer", key, v)
		return def
	}
	return n
}

// Share reads a number in [0, 1]; def when absent.
func (p *Params) Share(key string, def float64) float64 {
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
}

// Clocks moves the wall clocks of nodes (the LD_PRELOAD shim) and measures them.
type Clocks interface {
	// SetClockOffset shifts a node's wall clock by offset from the real time.
	SetClockOffset(node string, offset time.Duration) error
	// ClockOffset measures a node's offset: its TIME against the harness clock.
	ClockOffset(node string) (time.Duration, error)
}

// RoleView reports the role of every node now (a systems.System is one).
type RoleView interface {
	Roles() map[string]systems.Role
}

// WriteHolder holds back client writes on a node while f runs (a systems.System is one).
type WriteHolder interface {
	HoldWrites(ctx context.Context, node string, max time.Duration, f func(ctx context.Context) error) error
}

// Env is what the harness gives nemeses: the system's nodes, their roles and links, the lock's
// lease probe, and the run's timing. Nothing here is particular to a server family.
type Env struct {
	Cluster Cluster
	// Net cuts nodes' own network interfaces; nil when the backend cannot (local nodes share the
	// loopback interface).
	Net NetCutter
	// NetFaults says whether the run's backend offers Net, for checking a configuration before the
	// system runs.
	NetFaults bool
	// Peers cuts the paths between servers where the servers run (the docker backend's rules in
	// their namespaces); nil when those paths are links (local). PeerNet says whether the run's
	// backend offers Peers, for checking a configuration before the system runs.
	Peers   systems.PeerCutter
	PeerNet bool
	// Slow slows the paths between servers where the servers run (the local Engine's docker
	// backend: a packet queue per path in the caller's namespace); nil where those paths are links,
	// or where the backend cannot. PeerLatency says whether the run's backend offers Slow.
	Slow        systems.PeerSlower
	PeerLatency bool
	// Clocks is nil when the nodes run without the clock shim.
	Clocks Clocks
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
	// Writes holds writes back on a node (the clock nemesis's quiet reset); nil when unavailable.
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

// builders lists every nemesis and how to build it from its parameters.
func builders() map[string]builder {
	return map[string]builder{
		"none":            func(Env, *Params) (Nemesis, error) { return None{}, nil },
		"restart":         buildRestart(false),
		"restart-delayed": buildRestart(true),
		"partition":       buildPartition,
		"latency":         buildLatency,
		"pause":           buildPause,
		"clock":           buildClock,
		"client-pause":    buildClientPause,
		"client-crash":    buildClientCrash,
		"client-clock":    buildClientClock,
		"failover":        buildFailover,
		"netcut":          buildNetCut,
	}
}

// NeedsClocks reports whether a spec's nemesis moves node clocks, so that the nodes must run with
// the clock shim.
func NeedsClocks(spec Spec) bool { return spec.Name == "clock" }

// TouchesLinks reports whether a spec's nemesis puts faults on links (cuts, slows or stalls network
// paths), so that the clients must reach the nodes through links. The other nemeses act on processes
// and clocks, and a run with only those can let its clients talk to the nodes directly.
func TouchesLinks(spec Spec) bool {
	switch spec.Name {
	case "partition", "latency", "failover":
		return true
	case "clock":
		// A quiet reset may drain a node by cutting its clients' links (Clock.quietReset).
		return spec.Params["reset"] == ResetQuiet
	}
	return false
}

// Names lists the nemeses Build knows.
func Names() []string { return slices.Sorted(maps.Keys(builders())) }

// ParamValues lists the parameters a nemesis reads, each with its allowed values when they are a
// fixed set (nil for durations, numbers and the like), for shell completion. It builds the nemesis
// for an example run (5 nodes, 2 client groups, TTL 2s) and records what the builder reads, so the
// list cannot drift from the parameters the nemesis really takes.
func ParamValues(name string) (map[string][]string, error) {
	b, ok := builders()[name]
	if !ok {
		return nil, Validate(name)
	}
	env := Env{Nodes: []string{"n1", "n2", "n3", "n4", "n5"}, Groups: []string{"c1", "c2"}, Keys: []string{"k"},
		TTL: 2 * time.Second, Interval: 5 * time.Second, NodeTimeout: 100 * time.Millisecond, RestartDelay: 3 * time.Second,
		Log: slog.New(slog.DiscardHandler)}
	p := NewParams(Spec{Name: name})
	// The example's own errors do not matter: only which parameters were read.
	_, _ = b(env, p)
	out := map[string][]string{}
	for k := range p.used {
		out[k] = slices.Clone(p.allowed[k])
	}
	return out, nil
}

// Validate checks a nemesis name.
func Validate(name string) error {
	if _, ok := builders()[name]; ok {
		return nil
	}
	return fmt.Errorf("unknown nemesis %q: use one of %s", name, strings.Join(Names(), ", "))
}

// Build makes the nemesis a spec names, with its parameters checked.
func Build(spec Spec, env Env) (Nemesis, error) {
	b, ok := builders()[spec.Name]
	if !ok {
		return nil, Validate(spec.Name)
	}
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	p := NewParams(spec)
	n, err := b(env, p)
	if perr := p.Err(); perr != nil {
		return nil, perr
	}
	if err != nil {
		return nil, fmt.Errorf("nemesis %s: %w", spec.Name, err)
	}
	return n, nil
}

func buildRestart(delayed bool) builder {
	return func(env Env, p *Params) (Nemesis, error) {
		r := &Restart{Cluster: env.Cluster, Nodes: env.Nodes, env: env}
		r.Interval = p.Duration("interval", env.Interval)
		switch target := p.Choice("target", "mixed", RestartTargets()...); target {
		case "one":
			r.MajorityShare = -1
		case "majority":
			r.MajorityShare = 1
		case TargetHolder, TargetHolderOne, TargetHolderMajority, TargetLeader, TargetFollowers:
			r.Target = target
		}
		r.Wipe = p.Choice("wipe", "false", "true", "false") == "true"
		r.AtGrant = p.Choice("at", "plan", "plan", "grant") == "grant"
		if r.AtGrant && r.Target != "" {
			p.fail("at=grant times the drawn targets (mixed, one, majority); target=%s chooses its nodes when its fault starts: drop at=grant", r.Target)
		}
		r.GrantWait = min(r.Interval, env.TTL) / 2
		r.TargetWait = p.Duration("wait", max(env.Interval/2, env.TTL))
		if _, ok := p.spec.Params["wait"]; ok && r.Target == "" {
			p.fail("wait= applies only to the lock-aware targets: use target=holder, holder-one or holder-majority, or drop wait")
		}
		if delayed {
			r.Delay = p.Duration("delay", env.RestartDelay)
			if r.Delay <= 0 {
				return nil, fmt.Errorf("delay must be positive")
			}
		}
		if r.Interval <= 0 {
			return nil, fmt.Errorf("interval must be positive")
		}
		if IsRoleTarget(r.Target) {
			if err := CheckTarget(env, r.Target); err != nil {
				return nil, err
			}
		}
		return r, nil
	}
}

// RestartTargets lists the restart nemesis's target values: mixed (one node or a majority, drawn per
// fault), one, majority, and the lock-aware holder kinds.
func RestartTargets() []string {
	return []string{"mixed", TargetOne, TargetMajority, TargetHolder, TargetHolderOne, TargetHolderMajority, TargetLeader, TargetFollowers}
}
