package nemesis

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind describes one nemesis: its parameters, what it needs from the system, and how to build it.
// A new nemesis is one file with its code and its parameters, plus one row in kinds.
type Kind struct {
	// Name is what --nemesis and scenario files call it.
	Name string
	// Does says what it does, as a verb phrase after its name ("pauses a server's process"); the
	// refusal of a system that cannot host it starts with it.
	Does string
	// Needs are the capabilities it needs whatever its parameters (see also Param.Needs).
	Needs Capability
	// Params are the parameters it takes.
	Params []Param
	// Instead, when set, is the fix a refusal offers besides another backend ("partition:kind=isolate
	// cuts the same paths in the harness's proxies"); empty lists the faults the run can take.
	Instead string

	build builder
}

// ParamType is how a parameter's value reads.
type ParamType string

// The parameter types.
const (
	// TypeDuration is a duration ("1.5s"), or one of the parameter's named Values.
	TypeDuration ParamType = "duration"
	// TypeShare is a number from 0 to 1.
	TypeShare ParamType = "share"
	// TypeChoice is one of Values.
	TypeChoice ParamType = "choice"
	// TypeChoices is one or more of Values joined by "+".
	TypeChoices ParamType = "choices"
	// TypeGroup is a client group of the run (c1, c2, ...) or one of Values.
	TypeGroup ParamType = "group"
)

// Param is one parameter of a nemesis.
type Param struct {
	Name string
	Type ParamType
	// Values are the allowed values of a choice, or the names a duration may take instead; Meanings
	// says what some of them mean ("TTL/2"), for help and errors.
	Values   []string
	Meanings map[string]string
	// Default says what an absent parameter means, in words ("2×TTL", "--interval").
	Default string
	Help    string
	// Needs are the capabilities a value of the parameter adds to its kind's (paths=peers needs
	// the paths between servers); for choices, every chosen value adds its own.
	Needs map[string]Capability
	// Drops are the capabilities of its kind a value makes needless (source=host moves the hosts'
	// clocks, not the shim's).
	Drops map[string]Capability
}

// kinds lists every nemesis.
func kinds() []Kind {
	return []Kind{
		{Name: "none", Does: "injects nothing", build: func(Env, *Params) (Nemesis, error) { return None{}, nil }},
		{Name: "restart", Does: "kills and restarts a server", Needs: NodeProcesses, Params: restartParams(false), build: buildRestart(false)},
		{Name: "restart-delayed", Does: "kills a server and restarts it after a delay", Needs: NodeProcesses, Params: restartParams(true), build: buildRestart(true)},
		{Name: "partition", Does: "cuts network paths", Needs: Links, Params: partitionParams(), build: buildPartition},
		{Name: "latency", Does: "slows network paths", Needs: Links, Params: latencyParams(), build: buildLatency},
		{Name: "pause", Does: "pauses a server's process", Needs: NodeSignals, Params: pauseParams(), build: buildPause},
		{Name: "disk-stall", Does: "holds a server's fsyncs", Needs: DiskStalls, Params: diskStallParams(), build: buildDiskStall},
		{Name: "clock", Does: "moves a server's clock", Needs: NodeClocks, Params: clockParams(), build: buildClock},
		{Name: "client-pause", Does: "pauses client processes", Needs: ClientProcesses, Params: clientPauseParams(), build: buildClientPause},
		{Name: "client-crash", Does: "kills client processes", Needs: ClientProcesses, Params: clientCrashParams(), build: buildClientCrash},
		{Name: "client-clock", Does: "moves clients' clocks", Needs: ClientClockShifts, Params: clientClockParams(), build: buildClientClock},
		{Name: "failover", Does: "takes the primary away so that a replica takes over", Needs: Promotion | NodeProcesses | PeerCuts | Links, Params: failoverParams(), build: buildFailover},
		{Name: "terminate", Does: "ends the sessions of the clients holding locks on a server (pg_terminate_backend)", Needs: Sessions, Params: terminateParams(), build: buildTerminate},
		{Name: "halfopen", Does: "drops the packets of the lock holders' connections to a server, no FIN or RST, until the server's keepalive ends their sessions", Needs: Sessions, Params: halfOpenParams(), build: buildHalfOpen},
		{Name: "netcut", Does: "cuts a server's own network interface", Needs: NetCuts, Params: netcutParams(), build: buildNetCut,
			Instead: "partition:kind=isolate, which cuts the same paths in the harness's proxies"},
	}
}

// Lookup finds a nemesis by name.
func Lookup(name string) (Kind, error) {
	for _, k := range kinds() {
		if k.Name == name {
			return k, nil
		}
	}
	return Kind{}, fmt.Errorf("unknown nemesis %q: use one of %s (--nemesis help describes each)", name, strings.Join(Names(), ", "))
}

// Names lists the nemeses, sorted.
func Names() []string {
	var names []string
	for _, k := range kinds() {
		names = append(names, k.Name)
	}
	slices.Sort(names)
	return names
}

// Validate checks a nemesis name.
func Validate(name string) error {
	_, err := Lookup(name)
	return err
}

// ClientSide reports whether the kind acts only on the clients and the paths to the servers, so it
// runs against servers lockpick does not run.
func (k Kind) ClientSide() bool { return k.Needs&nodeSide == 0 }

// param finds a parameter of the kind.
func (k Kind) param(name string) (Param, bool) {
	i := slices.IndexFunc(k.Params, func(p Param) bool { return p.Name == name })
	if i < 0 {
		return Param{}, false
	}
	return k.Params[i], true
}

// paramNames lists the kind's parameters, sorted.
func (k Kind) paramNames() []string {
	var names []string
	for _, p := range k.Params {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// ParamValues lists the parameters a nemesis takes, each with its allowed values when they are a
// fixed set (nil for durations, numbers and the like), for shell completion.
func ParamValues(name string) (map[string][]string, error) {
	k, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, p := range k.Params {
		switch p.Type {
		case TypeChoice, TypeChoices:
			out[p.Name] = slices.Clone(p.Values)
		case TypeGroup:
			out[p.Name] = append([]string{"c1", "c2"}, p.Values...)
		default:
			out[p.Name] = nil
		}
	}
	return out, nil
}

// Fault is one nemesis of a run, parsed and its parameters checked against its kind.
type Fault struct {
	Kind Kind
	Spec Spec
}

// String is the fault's canonical text form.
func (f Fault) String() string { return f.Spec.String() }

// Name is the fault's nemesis name.
func (f Fault) Name() string { return f.Spec.Name }

// Needs are the capabilities the fault needs: its kind's, and those its parameters' values add.
func (f Fault) Needs() Capability {
	return f.Kind.Needs&^f.paramDrops() | f.paramNeeds()
}

// paramDrops are the capabilities of the kind the fault's parameter values make needless.
func (f Fault) paramDrops() Capability {
	var c Capability
	for _, p := range f.Kind.Params {
		c |= p.Drops[f.Spec.Params[p.Name]]
	}
	return c
}

// paramNeeds are the capabilities the fault's parameter values add.
func (f Fault) paramNeeds() Capability {
	var c Capability
	for _, p := range f.Kind.Params {
		c |= p.needsOf(f.Spec.Params[p.Name])
	}
	return c
}

// needsOf are the capabilities value (one value, or several joined by "+") adds.
func (p Param) needsOf(value string) Capability {
	var c Capability
	if value == "" || p.Needs == nil {
		return c
	}
	for _, v := range strings.Split(value, "+") {
		c |= p.Needs[v]
	}
	return c
}

// TouchesLinks reports whether the fault puts faults on links (cuts, slows or stalls network paths),
// so that the clients must reach the nodes through links. Faults that act only on processes and
// clocks let a run's clients talk to the nodes directly.
func (f Fault) TouchesLinks() bool { return f.Needs().Has(Links) }

// MovesClocks reports whether the fault moves node clocks, so that the nodes run with the clock shim.
func (f Fault) MovesClocks() bool { return f.Needs().Has(NodeClocks) }

// Build makes the fault's nemesis over env.
func (f Fault) Build(env Env) (Nemesis, error) {
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	p := NewParams(f.Spec)
	n, err := f.Kind.build(env, p)
	if perr := p.Err(); perr != nil {
		return nil, perr
	}
	if err != nil {
		return nil, fmt.Errorf("nemesis %s: %w", f.Spec.Name, err)
	}
	return n, nil
}

// Build makes the nemesis a spec names, with its parameters checked.
func Build(spec Spec, env Env) (Nemesis, error) {
	f, err := NewFault(spec)
	if err != nil {
		return nil, err
	}
	return f.Build(env)
}

// NewFault checks spec against its kind: a known nemesis, known parameters, values of their types.
func NewFault(spec Spec) (Fault, error) {
	k, err := Lookup(spec.Name)
	if err != nil {
		return Fault{}, err
	}
	var errs []string
	for _, key := range sortedKeys(spec.Params) {
		p, ok := k.param(key)
		if !ok {
			errs = append(errs, fmt.Sprintf("unknown parameter %q: %s takes %s", key, k.Name, takes(k)))
			continue
		}
		if err := p.check(spec.Params[key]); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return Fault{}, fmt.Errorf("nemesis %s: %s", k.Name, strings.Join(errs, "; "))
	}
	return Fault{Kind: k, Spec: spec}, nil
}

// takes says which parameters a kind takes.
func takes(k Kind) string {
	if len(k.Params) == 0 {
		return "no parameters"
	}
	return strings.Join(k.paramNames(), ", ")
}

// ParseFaults reads the text form of a run's nemeses ("none", or specs joined by commas) into faults.
func ParseFaults(text string) ([]Fault, error) {
	specs, err := ParseSpecs(text)
	if err != nil {
		return nil, err
	}
	faults := make([]Fault, 0, len(specs))
	for _, s := range specs {
		f, err := NewFault(s)
		if err != nil {
			return nil, err
		}
		faults = append(faults, f)
	}
	return faults, nil
}

// JoinFaults is the text form of faults, "none" when there are none.
func JoinFaults(faults []Fault) string {
	specs := make([]Spec, len(faults))
	for i, f := range faults {
		specs[i] = f.Spec
	}
	return JoinSpecs(specs)
}

// isGroupName reports whether v names a client group: c1, c2, ...
func isGroupName(v string) bool {
	return len(v) > 1 && v[0] == 'c' && v[1] != '0' && strings.Trim(v[1:], "0123456789") == ""
}

// check checks one value against the parameter's type; Params checks it again, with the run's
// values, when the nemesis is built.
func (p Param) check(v string) error {
	switch p.Type {
	case TypeDuration:
		if d, err := time.ParseDuration(v); (err != nil || d < 0) && !slices.Contains(p.Values, v) {
			if len(p.Values) > 0 {
				return fmt.Errorf("%s=%s is not allowed: use one of %s, or a duration like %s=3s", p.Name, v, p.valuesText(), p.Name)
			}
			return fmt.Errorf("%s=%s is not a duration: use a value like %s=2s", p.Name, v, p.Name)
		}
	case TypeShare:
		if f, err := strconv.ParseFloat(v, 64); err != nil || f < 0 || f > 1 {
			return fmt.Errorf("%s=%s is not a share between 0 and 1", p.Name, v)
		}
	case TypeChoice:
		if !slices.Contains(p.Values, v) {
			return fmt.Errorf("%s=%s is not allowed: use one of %s", p.Name, v, p.valuesText())
		}
	case TypeChoices:
		for _, c := range strings.Split(v, "+") {
			if !slices.Contains(p.Values, c) {
				return fmt.Errorf("%s=%s: %q is not allowed: use one or more of %s, joined by +", p.Name, v, c, strings.Join(p.Values, ", "))
			}
		}
	case TypeGroup:
		if !isGroupName(v) && !slices.Contains(p.Values, v) {
			return fmt.Errorf("%s=%s is not a client group: use c1, c2, ...%s", p.Name, v, orValues(p.Values))
		}
	}
	return nil
}

// valuesText lists the parameter's values, each with its meaning where it has one.
func (p Param) valuesText() string {
	out := make([]string, len(p.Values))
	for i, v := range p.Values {
		out[i] = v
		if m := p.Meanings[v]; m != "" {
			out[i] += " (" + m + ")"
		}
	}
	return strings.Join(out, ", ")
}

func orValues(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return " or " + strings.Join(values, ", ")
}

// Describe is the help text of every nemesis: what it does and needs, and its parameters with their
// types, defaults and meaning.
func Describe() string {
	var b strings.Builder
	b.WriteString("--nemesis NAME[:key=value...][,NAME...]: faults to inject, each at most once\n")
	for _, k := range kinds() {
		fmt.Fprintf(&b, "\n%s: %s", k.Name, k.Does)
		if k.Needs != 0 {
			fmt.Fprintf(&b, " (needs %s)", k.Needs)
		}
		b.WriteString("\n")
		for _, p := range k.Params {
			fmt.Fprintf(&b, "  %s=%s  %s", p.Name, p.typeText(), p.Help)
			if len(p.Meanings) > 0 {
				fmt.Fprintf(&b, ": %s", p.valuesText())
			}
			if p.Default != "" {
				fmt.Fprintf(&b, " (default %s)", p.Default)
			}
			for _, v := range sortedKeys(p.Needs) {
				fmt.Fprintf(&b, "; %s=%s needs %s", p.Name, v, p.Needs[v])
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// typeText is how a parameter's value is written, for help.
func (p Param) typeText() string {
	switch p.Type {
	case TypeChoice:
		return strings.Join(p.Values, "|")
	case TypeChoices:
		return strings.Join(p.Values, "+")
	case TypeGroup:
		return "c1|c2|..." + strings.Join(append([]string{""}, p.Values...), "|")
	case TypeDuration:
		if len(p.Values) > 0 {
			return "DURATION|" + strings.Join(p.Values, "|")
		}
		return "DURATION"
	}
	return strings.ToUpper(string(p.Type))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Parameters several nemeses take.

func intervalParam() Param {
	return Param{Name: "interval", Type: TypeDuration, Default: "--interval", Help: "mean time between faults"}
}

func durationParam(def, help string) Param {
	return Param{Name: "duration", Type: TypeDuration, Default: def, Help: help}
}

func targetParam(values []string, def string) Param {
	return Param{Name: "target", Type: TypeChoice, Values: values, Default: def,
		Help: "the nodes hit: by count, by the current lease's holder (chosen when the fault starts) or by role"}
}

func waitParam(def string) Param {
	return Param{Name: "wait", Type: TypeDuration, Default: def, Help: "how long a lock-aware fault waits for the lease it aims at"}
}

// pathsParam chooses between the paths from the client groups and those between servers; the
// latter need capability peers.
func pathsParam(peers Capability, does string) Param {
	return Param{Name: "paths", Type: TypeChoice, Values: []string{PathsClients, PathsPeers}, Default: PathsClients,
		Help: does + " the paths from the client groups, or those between the servers", Needs: map[string]Capability{PathsPeers: peers}}
}

// groupParam is the client group a fault aims at; values are what it takes besides the groups.
func groupParam(values []string) Param {
	return Param{Name: "group", Type: TypeGroup, Values: values, Default: "every group", Help: "the client group whose paths are hit"}
}
