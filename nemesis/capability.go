package nemesis

import (
	"math/bits"
	"strings"
)

// Capability is one thing a fault needs from the system it runs on, and a set of them (a bit
// each). A fault's kind says which it needs; a backend on a system says which it offers (Offered),
// before anything starts, so a fault that cannot run is refused in one line.
type Capability uint16

// The capabilities.
const (
	// Promotion: the system has a primary whose replicas take over when it fails. (First: a
	// refusal names the lowest capability missing, and a system without it lacks the point.)
	Promotion Capability = 1 << iota
	// NodeProcesses: lockpick can kill a server's process and start it again.
	NodeProcesses
	// NodeSignals: lockpick can stop a server's process and let it continue (SIGSTOP, SIGCONT).
	NodeSignals
	// NodeClocks: lockpick can move a server's wall clock (the LD_PRELOAD clock shim).
	NodeClocks
	// Links: the clients reach the servers through lockpick's proxies, which can cut, slow or stall.
	Links
	// NetCuts: each server has a network interface of its own, which lockpick can cut.
	NetCuts
	// PeerCuts: the servers talk to each other, and lockpick can cut those paths.
	PeerCuts
	// PeerLatency: the servers talk to each other, and lockpick can slow those paths.
	PeerLatency
	// WriteHolds: lockpick can hold client writes back on a server (CLIENT PAUSE WRITE).
	WriteHolds
	// ClientProcesses: lockpick can pause and kill the lock's client processes.
	ClientProcesses
	// ClientClockShifts: lockpick can move the wall clocks of the lock's clients.
	ClientClockShifts
	// Sessions: a server can end a client's session, as an administrator (or a pooler, or an
	// idle timeout) does (PostgreSQL's pg_terminate_backend).
	Sessions
	// HostClocks: lockpick can move the real clocks of the hosts the servers run on (--backend
	// ssh, with --allow-host-clock).
	HostClocks
	// DiskStalls: lockpick can hold a server process's fsyncs (strace on this machine's processes).
	DiskStalls

	capabilityEnd
)

// AllCapabilities is every capability.
const AllCapabilities = capabilityEnd - 1

// nodeSide are the capabilities that act on the servers themselves; a fault that needs none of them
// is client-side.
const nodeSide = NodeProcesses | NodeSignals | NodeClocks | NetCuts | PeerCuts | PeerLatency | WriteHolds | Promotion | Sessions | HostClocks | DiskStalls

// capabilityNames are the capabilities' names, in the order of their bits.
const capabilityNames = "promotion,node processes,node signals,node clocks,links,network cuts,peer cuts,peer latency,write holds,client processes,client clocks,session ends,host clocks,disk stalls"

// Has reports whether c holds every capability of need.
func (c Capability) Has(need Capability) bool { return c&need == need }

// Each lists the single capabilities of c, lowest first.
func (c Capability) Each() []Capability {
	var out []Capability
	for rest := c & AllCapabilities; rest != 0; rest &= rest - 1 {
		out = append(out, 1<<bits.TrailingZeros16(uint16(rest)))
	}
	return out
}

// String names the capabilities of c, joined by commas; "nothing" for none.
func (c Capability) String() string {
	all := strings.Split(capabilityNames, ",")
	var names []string
	for _, one := range c.Each() {
		names = append(names, all[bits.TrailingZeros16(uint16(one))])
	}
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, ", ")
}
