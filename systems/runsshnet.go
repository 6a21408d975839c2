package systems

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/lockpick-dev/lockpick/sshhost"
)

// Cuts on the ssh backend are iptables rules on the node's host, as Jepsen's grudges are: what
// comes from the harness's address to the node's port is dropped (or reset) on the host's INPUT,
// and what the node's port sends back to it on OUTPUT. The rules name the node's port, so the SSH
// connection that adds and removes them is never cut, nor another node on the same host; each rule
// carries the run's comment, so the end of the run (or lockpick clean after a killed one) finds it.

// sshCutRules are the rules (without -A/-D) that cut the node at port from the harness at control.
func sshCutRules(mode, control string, port int) [][]string {
	p := strconv.Itoa(port)
	in := []string{"INPUT", "-p", "tcp", "-s", control, "--dport", p}
	if mode == "reset" {
		return [][]string{append(in, "-j", "REJECT", "--reject-with", "tcp-reset")}
	}
	out := []string{"OUTPUT", "-p", "tcp", "-d", control, "--sport", p}
	return [][]string{append(in, "-j", "DROP"), append(out, "-j", "DROP")}
}

// CutNetwork implements nemesis.NetCutter. A running node that still answers the harness once
// its rules are in is an error, not a cut: the host sees this machine at another address than the
// rules name, and a run that believed the node cut would judge a fault that never happened.
func (r *sshRunner) CutNetwork(ctx context.Context, node, mode string) error {
	if err := r.cutNetwork(ctx, node, mode, r.iptables); err != nil {
		return err
	}
	if !r.Running(node) {
		return nil
	}
	if err := PingOnce(ctx, r.addrOf(node)); err == nil {
		h, _ := r.node(node)
		return fmt.Errorf("node %s still answers through its cut: %s sees this machine at another address than %s (NAT, a jump host?)", node, h.host.(*sshNode).m.name, h.host.(*sshNode).m.control)
	}
	return nil
}

// HealNetwork implements nemesis.NetCutter.
func (r *sshRunner) HealNetwork(ctx context.Context, node string) error {
	return r.healNetwork(ctx, node, r.iptables)
}

// iptables adds (-A) or deletes (-D) a cut's rules on the node's host, in one command.
func (r *sshRunner) iptables(ctx context.Context, n *tableNode, op, mode string) error {
	h := n.host.(*sshNode)
	return r.hostIptables(ctx, n, op, sshCutRules(mode, h.m.control, h.port))
}

// hostIptables adds (-A, -I) or deletes (-D) rules on n's host in one command, each with the run's
// comment (after the chain: -I takes the position first).
func (r *sshRunner) hostIptables(ctx context.Context, n *tableNode, op string, rules [][]string) error {
	h := n.host.(*sshNode)
	var cmds []string
	for _, rule := range rules {
		words := []string{"iptables", "-w", op}
		rule = append(append(rule[:1:1], "-m", "comment", "--comment", r.ruleTag()), rule[1:]...)
		for _, w := range rule {
			words = append(words, sshhost.Quote(w))
		}
		cmds = append(cmds, strings.Join(words, " "))
	}
	if _, err := h.m.h.Sh(ctx, strings.Join(cmds, " && ")); err != nil {
		return fmt.Errorf("node %s on %s: %w", n.spec.name, h.m.name, err)
	}
	return nil
}

// CutPeer implements PeerCutter: the rules of the docker backends (peerRules: what the calling node
// sends to the callee's host and port, and what comes back from there), on the caller's host. The
// rules match the caller's host, not its process: a node that shares the caller's host loses the
// same path, so a run with peer cuts places one node per host (resolveSSH refuses fewer hosts).
func (r *sshRunner) CutPeer(ctx context.Context, from, to, mode string) error {
	f, t, err := r.nodePair(from, to)
	if err != nil {
		return err
	}
	return f.peer.cut(&f.op, from, to, mode, t.peer, func(op string, rules [][]string) error {
		return r.hostIptables(ctx, f, op, rules)
	})
}

// HealPeer implements PeerCutter.
func (r *sshRunner) HealPeer(ctx context.Context, from, to string) error {
	f, t, err := r.nodePair(from, to)
	if err != nil {
		return err
	}
	return f.peer.heal(&f.op, from, to, t.peer, func(op string, rules [][]string) error {
		return r.hostIptables(ctx, f, op, rules)
	})
}
