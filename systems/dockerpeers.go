package systems

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"sync"
)

// PeerCutter cuts the paths between servers where they run: on the docker backend servers talk to
// each other over their containers' own interfaces, with no proxy of the harness between them, so a
// cut of such a path is packet filter rules in the calling server's network namespace. A path from
// one node to another carries the connections the first opens to the second's server port (a
// replica to its primary, a sentinel to a node, an etcd member to another's peer port): as a link
// does on the local backend, a cut of from->to leaves the connections to->from alone.
type PeerCutter interface {
	// CutPeer cuts the path from one node to another: mode "drop" drops its packets both ways (TCP
	// retransmits, and delivers what was held back once healed), "reset" answers them with TCP
	// resets, "lose-reply" drops only what comes back. A cut outlives restarts of either node.
	CutPeer(ctx context.Context, from, to, mode string) error
	// HealPeer removes the cut of the path from one node to another, if any.
	HealPeer(ctx context.Context, from, to string) error
}

// dockerPeer is how other servers reach a node of the docker backend: its container's address and
// the port they call (a redis node's, a sentinel's, an etcd member's peer port), and the cuts of the
// paths from the node to others (callee -> mode), guarded by the node's op.
type dockerPeer struct {
	ip   string
	port int
	cuts map[string]string
	// slows are the slowdowns of the paths from the node to others (callee -> its queue), on the
	// local Engine only (dockerslow.go).
	slows map[string]*peerSlow
}

// peerRules are the iptables rules (without -A/-D), in the caller's namespace, that cut its
// connections to ip:port.
func peerRules(mode, ip string, port int) [][]string {
	out, in := peerMatch(ip, port)
	switch mode {
	case "reset":
		rst := []string{"-j", "REJECT", "--reject-with", "tcp-reset"}
		return [][]string{append(out, rst...), append(in, rst...)}
	case "lose-reply":
		return [][]string{append(in, "-j", "DROP")}
	}
	return [][]string{append(out, "-j", "DROP"), append(in, "-j", "DROP")}
}

// peerMatch are the chain and matches, in the caller's namespace, of the packets of its connections
// to ip:port: what it sends (OUTPUT) and what comes back (INPUT).
func peerMatch(ip string, port int) (out, in []string) {
	p := strconv.Itoa(port)
	return []string{"OUTPUT", "-p", "tcp", "-d", ip, "--dport", p}, []string{"INPUT", "-p", "tcp", "-s", ip, "--sport", p}
}

// peerModes are the modes CutPeer knows.
var peerModes = []string{"drop", "reset", "lose-reply"}

// CutPeer implements PeerCutter.
func (b *docker) CutPeer(ctx context.Context, from, to, mode string) error {
	f, t, err := b.nodePair(from, to)
	if err != nil {
		return err
	}
	return f.peer.cut(&f.op, from, to, mode, t.peer, func(op string, rules [][]string) error {
		return b.nsIptables(ctx, from, op, rules)
	})
}

// HealPeer implements PeerCutter.
func (b *docker) HealPeer(ctx context.Context, from, to string) error {
	f, t, err := b.nodePair(from, to)
	if err != nil {
		return err
	}
	return f.peer.heal(&f.op, from, to, t.peer, func(op string, rules [][]string) error {
		return b.nsIptables(ctx, from, op, rules)
	})
}

// cut is CutPeer of both docker backends, on p, the caller's side, under its node's op: it checks
// the mode, and applies (apply "-I", first in their chains, ahead of a slowdown's queue, whose
// ACCEPT would end the chain before a cut further down) and records the rules that cut the path
// to t.
func (p *dockerPeer) cut(op *sync.Mutex, from, to, mode string, t dockerPeer, apply func(op string, rules [][]string) error) error {
	if !slices.Contains(peerModes, mode) {
		return fmt.Errorf("cut %s->%s: unknown mode %q: use one of %v", from, to, mode, peerModes)
	}
	if t.port == 0 {
		return fmt.Errorf("cut %s->%s: %s is called by no other server", from, to, to)
	}
	op.Lock()
	defer op.Unlock()
	if _, ok := p.cuts[to]; ok {
		return nil // in effect already
	}
	if err := apply("-I", peerRules(mode, t.ip, t.port)); err != nil {
		return fmt.Errorf("cut %s->%s: %w", from, to, err)
	}
	p.cuts[to] = mode
	return nil
}

// heal is HealPeer of both docker backends: it removes (apply "-D") the rules of the cut of the
// path to t, if any.
func (p *dockerPeer) heal(op *sync.Mutex, from, to string, t dockerPeer, apply func(op string, rules [][]string) error) error {
	op.Lock()
	defer op.Unlock()
	mode, ok := p.cuts[to]
	if !ok {
		return nil
	}
	if err := apply("-D", peerRules(mode, t.ip, t.port)); err != nil {
		return fmt.Errorf("heal %s->%s: %w", from, to, err)
	}
	delete(p.cuts, to)
	return nil
}

// nsIptables adds (-A, -I) or deletes (-D) rules in the network namespace of node's container.
func (b *docker) nsIptables(ctx context.Context, node, op string, rules [][]string) error {
	if err := NetToolsMissing(); err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	pid := b.session.Pid(ctx, node)
	if pid == 0 {
		return fmt.Errorf("node %s: its container does not run", node)
	}
	var errs []error
	for _, r := range rules {
		args := append([]string{"-t", strconv.Itoa(pid), "-n", "iptables", "-w", op}, r...)
		if out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("node %s: nsenter %v: %w: %s", node, args, err, bytes.TrimSpace(out)))
		}
	}
	return errors.Join(errs...)
}
