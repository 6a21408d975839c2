package systems

import (
	"fmt"
	"slices"
)

// Capability is a node operation a system may offer its faults.
type Capability string

// The capabilities a topology on a backend answers for.
const (
	// CapProcesses: nodes are killed and started again, with or without their data (Backend).
	CapProcesses Capability = "processes"
	// CapSignals: nodes are signalled, paused and continued (Backend.Signal).
	CapSignals Capability = "signals"
	// CapClocks: nodes' clocks move (Backend.SetClockOffset), given a clock shim.
	CapClocks Capability = "clocks"
	// CapLinks: every client path goes through a link (System.Links), so it can be cut or slowed.
	CapLinks Capability = "links"
	// CapNetCuts: a node is cut from the harness and its clients at its own interface (NetCutter).
	CapNetCuts Capability = "network cuts"
	// CapPeerCuts: a path between servers is cut where the servers run (PeerCutter).
	CapPeerCuts Capability = "peer cuts"
	// CapPeerLatency: a path between servers is slowed where the servers run (PeerSlower).
	CapPeerLatency Capability = "peer latency"
	// CapWriteHolds: client writes on a node are held back for a moment (System.HoldWrites).
	CapWriteHolds Capability = "write holds"
)

// Traits are what a topology's servers allow, whatever runs them.
type Traits struct {
	// Peers: the servers talk to each other (replication, sentinels, raft), over paths a fault
	// can cut or slow.
	Peers bool
	// WriteHolds: a node can hold its clients' writes back (redis's CLIENT PAUSE WRITE).
	WriteHolds bool
}

// Capabilities answers, before a run, which node operations the named system offers on backend
// (BackendLocal, BackendDocker on a local or remote Engine, or BackendExternal). Some hold only
// when the host has the tools too: network cuts on the local Engine need root, nsenter and
// iptables (NetToolsMissing), on a remote one iptables to pack (RemoteNetToolsMissing).
func Capabilities(system, backend string) ([]Capability, error) {
	t, err := Lookup(system)
	if err != nil {
		return nil, err
	}
	if err := CheckBackend(system, backend); err != nil {
		return nil, err
	}
	if backend == BackendExternal {
		// Someone else's servers: lockpick only talks to them, through links.
		return []Capability{CapLinks}, nil
	}
	caps := []Capability{CapProcesses, CapSignals, CapLinks}
	if t.Clocks() == nil {
		caps = append(caps, CapClocks)
	}
	tr := t.Traits()
	if tr.WriteHolds {
		caps = append(caps, CapWriteHolds)
	}
	if backend == BackendDocker {
		caps = append(caps, CapNetCuts)
		if tr.Peers {
			caps = append(caps, CapPeerCuts, CapPeerLatency)
		}
	}
	return caps, nil
}

// Offers reports whether the named system on backend offers c, and if not, names a backend that
// does, for a refusal.
func Offers(system, backend string, c Capability) error {
	caps, err := Capabilities(system, backend)
	if err != nil {
		return err
	}
	if slices.Contains(caps, c) {
		return nil
	}
	for _, other := range Backends() {
		if oc, err := Capabilities(system, other); err == nil && slices.Contains(oc, c) {
			return fmt.Errorf("system %s on the %s backend offers no %s: use --backend %s", system, backendName(backend), c, other)
		}
	}
	return fmt.Errorf("system %s offers no %s on any backend", system, c)
}

// backendName is backend, with the default spelled out.
func backendName(backend string) string {
	if backend == "" {
		return BackendLocal
	}
	return backend
}
