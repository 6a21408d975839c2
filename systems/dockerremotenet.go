package systems

import (
	"context"
	"fmt"
	"strings"
)

// Cuts on a remote Engine: iptables in the node's network holder. Clients reach a node through
// the port its holder publishes, and arrive from the Engine host's bridge gateway (its userland
// proxy) or, translated by the Engine host's NAT, from their own address outside the run's
// network; a cut drops (or resets) both, and leaves the run's network and loopback alone.

// remoteCutRules are the iptables rules (without -A/-D) that cut a node from every client: what
// comes from (goes to) the gateway, and what comes from (goes to) outside the run's network.
func remoteCutRules(mode, gw, subnet string) [][]string {
	from := [][]string{{"-s", gw}, {"!", "-s", subnet}}
	to := [][]string{{"-d", gw}, {"!", "-d", subnet}}
	var rules [][]string
	for i := range from {
		in := append([]string{"INPUT", "!", "-i", "lo"}, from[i]...)
		if mode == "reset" {
			rules = append(rules, append(in, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"))
			continue
		}
		rules = append(rules, append(in, "-j", "DROP"),
			append(append([]string{"OUTPUT", "!", "-o", "lo"}, to[i]...), "-j", "DROP"))
	}
	return rules
}

// CutNetwork implements nemesis.NetCutter.
func (b *dockerRemote) CutNetwork(ctx context.Context, node, mode string) error {
	return b.cutNetwork(ctx, node, mode, b.iptables)
}

// HealNetwork implements nemesis.NetCutter.
func (b *dockerRemote) HealNetwork(ctx context.Context, node string) error {
	return b.healNetwork(ctx, node, b.iptables)
}

// iptables adds (-A) or deletes (-D) a cut's rules.
func (b *dockerRemote) iptables(ctx context.Context, n *tableNode, op, mode string) error {
	return b.holderIptables(ctx, n, op, remoteCutRules(mode, b.session.Gateway().String(), b.session.Subnet().String()))
}

// CutPeer implements PeerCutter: the rules of the local Engine (peerRules), in the caller's holder.
func (b *dockerRemote) CutPeer(ctx context.Context, from, to, mode string) error {
	f, t, err := b.nodePair(from, to)
	if err != nil {
		return err
	}
	return f.peer.cut(&f.op, from, to, mode, t.peer, func(op string, rules [][]string) error {
		return b.holderIptables(ctx, f, op, rules)
	})
}

// HealPeer implements PeerCutter.
func (b *dockerRemote) HealPeer(ctx context.Context, from, to string) error {
	f, t, err := b.nodePair(from, to)
	if err != nil {
		return err
	}
	return f.peer.heal(&f.op, from, to, t.peer, func(op string, rules [][]string) error {
		return b.holderIptables(ctx, f, op, rules)
	})
}

// holderIptables adds (-A, -I) or deletes (-D) rules in one script of the shell kept in n's holder.
func (b *dockerRemote) holderIptables(ctx context.Context, n *tableNode, op string, rules [][]string) error {
	if b.tools["iptables"] == "" {
		return fmt.Errorf("node %s: the node image holds no iptables: %w", n.spec.name, RemoteNetToolsMissing())
	}
	cmds := make([]string, len(rules))
	for i, r := range rules {
		cmds[i] = b.tools["iptables"] + " -w " + op + " " + strings.Join(r, " ")
	}
	if _, err := b.sh(ctx, n, inHolder, strings.Join(cmds, " && ")); err != nil {
		return fmt.Errorf("node %s: %w", n.spec.name, err)
	}
	return nil
}
