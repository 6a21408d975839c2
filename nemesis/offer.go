package nemesis

import (
	"fmt"
	"strings"

	"github.com/lockpick-dev/lockpick/containers"
	"github.com/lockpick-dev/lockpick/systems"
)

// Offer is what a backend running a system can do for faults, known before anything starts.
type Offer struct {
	System, Backend string
	// Caps are the capabilities offered.
	Caps Capability
	// lacks says why each capability not offered is absent.
	lacks map[Capability]lack
}

// lack is why a capability is absent: a clause that follows "and" in a refusal. final: the clause
// carries its own fix, and the refusal adds none.
type lack struct {
	why   string
	final bool
}

// Offered is the capability set of backend running system (docker on the Engine at dockerHost),
// its servers kept with persistence, for --dry-run and for refusing a fault before anything starts.
// It is the one place that says which system and backend can do what.
func Offered(system, backend, dockerHost string, persistence systems.Persistence) Offer {
	o := staticOffer(system, backend)
	if t, err := systems.Lookup(system); err == nil {
		if w := t.Traits().DiskWaitsWith; w != "" && persistence != w {
			o.lack(DiskStalls, fmt.Sprintf("%s waits for its disk only with --persistence %s, so a stall would hold nothing: add --persistence %s", t.Traits().Server, w, w), true)
		}
	}
	if backend == systems.BackendDocker {
		// The docker backend cuts and slows paths with iptables in the servers' namespaces.
		missing := systems.NetToolsMissing
		if !containers.IsLocalHost(dockerHost) {
			missing = systems.RemoteNetToolsMissing
		}
		if err := missing(); err != nil {
			o.lack(NetCuts|PeerCuts|PeerLatency, err.Error(), true)
		}
	}
	return o
}

// staticOffer is what backend running system can do on any machine: the backend's answer, then
// the topology's own (its clocks, its traits, the roles its layout starts with).
func staticOffer(system, backend string) Offer {
	o := Offer{System: system, Backend: backend, Caps: AllCapabilities, lacks: map[Capability]lack{}}
	switch backend {
	case systems.BackendExternal:
		o.lack(nodeSide, "--backend external servers are someone else's", false)
	case systems.BackendDocker:
	case systems.BackendSSH:
		if err := systems.CheckBackend(system, backend); err != nil {
			o.lack(AllCapabilities, err.Error(), true)
			return o
		}
	default:
		o.lack(NetCuts, "--backend local nodes share the loopback interface", false)
	}
	if backend != systems.BackendLocal && backend != "" {
		// strace attaches to a process of this machine; a container's or a host's is elsewhere.
		o.lack(DiskStalls, "--backend "+backend+" servers are not processes lockpick can trace here", false)
	}
	if backend != systems.BackendSSH {
		// Local nodes and containers run on this machine's kernel: its clock is the harness's.
		o.lack(HostClocks, "--backend "+backend+" nodes share this machine's clock, which lockpick does not move", false)
	}
	t, err := systems.Lookup(system)
	if err != nil {
		o.lack(AllCapabilities, err.Error(), true)
		return o
	}
	if err := t.Clocks(); err != nil {
		o.lack(NodeClocks, err.Error(), false)
	}
	tr := t.Traits()
	if !tr.Peers {
		o.lack(PeerCuts|PeerLatency, "the servers of "+system+" never talk to each other", false)
	}
	if tr.DiskIdle != "" {
		o.lack(DiskStalls, tr.DiskIdle, false)
	}
	if !tr.WriteHolds {
		o.lack(WriteHolds, "the servers of "+system+" cannot hold writes back", false)
	}
	if !tr.Sessions {
		o.lack(Sessions, "the servers of "+system+" have no client sessions lockpick can end", false)
	}
	if !promotes(t) {
		o.lack(Promotion, system+" has no primary whose replicas take over", false)
	}
	return o
}

// promotes reports whether the topology starts a primary with replicas that can take over from it.
func promotes(t systems.Topology) bool {
	nodes, err := t.Layout(systems.Config{Nodes: 3, Sentinel: systems.SentinelConfig{Replicas: 2, Sentinels: 3}, Etcd: systems.EtcdConfig{Members: 3},
		Postgres: systems.PostgresConfig{Replicas: 1}})
	if err != nil {
		return false
	}
	roles := map[systems.Role]bool{}
	for _, n := range nodes {
		roles[n.Role] = true
	}
	return roles[systems.RolePrimary] && roles[systems.RoleReplica]
}

// lack takes caps out of the offer; a capability already absent keeps its first reason.
func (o *Offer) lack(caps Capability, why string, final bool) {
	for _, c := range caps.Each() {
		if o.Caps.Has(c) {
			o.Caps &^= c
			o.lacks[c] = lack{why: why, final: final}
		}
	}
}

// Check refuses the first fault that needs a capability the offer lacks, in one line naming the
// fault, the capability, why it is absent and what has it.
func (o Offer) Check(faults []Fault) error {
	for _, f := range faults {
		if missing := f.Needs() &^ o.Caps; missing != 0 {
			return o.refuse(f, missing.Each()[0])
		}
	}
	return nil
}

func (o Offer) refuse(f Fault, c Capability) error {
	what := fmt.Sprintf("--nemesis %s %s (%s)", f.Name(), f.Kind.Does, c)
	fromParam := ""
	if !f.Kind.Needs.Has(c) {
		fromParam = f.paramText(c)
		what = fmt.Sprintf("--nemesis %s with %s needs %s", f.Name(), fromParam, c)
	}
	l := o.lacks[c]
	if l.final {
		return fmt.Errorf("%s, and %s", what, l.why)
	}
	var fixes []string
	if b := o.backendsWith(c); len(b) > 0 {
		fixes = append(fixes, "--backend "+strings.Join(b, " or "))
	} else if s := o.systemsWith(c); len(s) > 0 {
		fixes = append(fixes, "a lock that runs on "+strings.Join(s, " or "))
	}
	switch {
	case fromParam != "":
		fixes = append(fixes, "drop "+fromParam)
	case f.Kind.Instead != "":
		fixes = append(fixes, f.Kind.Instead)
	default:
		fixes = append(fixes, o.otherFaults(f.Name()))
	}
	return fmt.Errorf("%s, and %s: use %s", what, l.why, strings.Join(fixes, ", or "))
}

// paramText is the parameter setting of the fault that needs c ("paths=peers").
func (f Fault) paramText(c Capability) string {
	for _, p := range f.Kind.Params {
		if v := f.Spec.Params[p.Name]; p.needsOf(v).Has(c) {
			return p.Name + "=" + v
		}
	}
	return ""
}

// backendsWith are the other backends that offer c on the offer's system.
func (o Offer) backendsWith(c Capability) []string {
	var out []string
	for _, b := range systems.Backends() {
		if b != o.Backend && staticOffer(o.System, b).Caps.Has(c) {
			out = append(out, b)
		}
	}
	return out
}

// systemsWith are the other systems that offer c on the offer's backend.
func (o Offer) systemsWith(c Capability) []string {
	var out []string
	for _, s := range systems.Names() {
		if s != o.System && staticOffer(s, o.Backend).Caps.Has(c) {
			out = append(out, s)
		}
	}
	return out
}

// otherFaults lists the faults the offer can host, besides the one refused: "client-side faults
// (...)" when those are all it can host.
func (o Offer) otherFaults(refused string) string {
	var names []string
	clientSide := true
	for _, name := range o.Kinds() {
		if name == refused {
			continue
		}
		k, _ := Lookup(name)
		names = append(names, name)
		clientSide = clientSide && k.ClientSide()
	}
	if len(names) == 0 {
		return "--nemesis none"
	}
	label := "another fault"
	if clientSide {
		label = "client-side faults"
	}
	return fmt.Sprintf("%s (%s)", label, strings.Join(names, ", "))
}

// Kinds lists the nemeses the offer can host with their default parameters, in the registry's order.
func (o Offer) Kinds() []string {
	var names []string
	for _, k := range kinds() {
		if k.Name != "none" && o.Caps.Has(k.Needs) {
			names = append(names, k.Name)
		}
	}
	return names
}
