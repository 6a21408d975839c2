package systems

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

// Network cuts on the docker backend are packet filter rules inside the node's own network
// namespace, entered from the host with nsenter: the container's interface drops (or resets) what
// comes from and goes to the host's address on the run's network, which is where every client's
// connection comes from. The rules live in the namespace, so they die with the container and no cut
// outlives the run. The container outlives the node's restarts, so a node restarted while cut is
// still cut; its start then waits for its log to say it is ready, as it cannot be asked.
// (Measured here: iptables works in a container's namespace; tc netem does not exist on this
// kernel, so latency on the client paths stays in the harness's proxies, and latency between
// servers is a packet queue per path, read in lockpick: dockerslow.go.)

// NetToolsMissing says what the host lacks to cut a container's network, or nil.
func NetToolsMissing() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("netcut enters each container's network namespace and needs root: run lockpick as root, or use partition:kind=isolate")
	}
	for _, tool := range []string{"nsenter", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("netcut needs %s on the host: install it with `apt-get install util-linux iptables`", tool)
		}
	}
	return nil
}

// cutRules are the iptables rules (without -A/-D) that cut a node from the harness at gw.
func cutRules(mode, gw string) [][]string {
	if mode == "reset" {
		return [][]string{{"INPUT", "-p", "tcp", "-s", gw, "-j", "REJECT", "--reject-with", "tcp-reset"}}
	}
	return [][]string{{"INPUT", "-s", gw, "-j", "DROP"}, {"OUTPUT", "-d", gw, "-j", "DROP"}}
}

// CutNetwork implements nemesis.NetCutter.
func (b *docker) CutNetwork(ctx context.Context, node, mode string) error {
	return b.cutNetwork(ctx, node, mode, b.iptables)
}

// HealNetwork implements nemesis.NetCutter.
func (b *docker) HealNetwork(ctx context.Context, node string) error {
	return b.healNetwork(ctx, node, b.iptables)
}

// iptables adds (-A) or deletes (-D) a cut's rules in the node's network namespace.
func (b *docker) iptables(ctx context.Context, n *tableNode, op, mode string) error {
	pid := b.session.Pid(ctx, n.spec.name)
	if pid == 0 {
		return fmt.Errorf("node %s: its container does not run", n.spec.name)
	}
	for _, r := range cutRules(mode, b.session.Gateway().String()) {
		args := append([]string{"-t", strconv.Itoa(pid), "-n", "iptables", "-w", op}, r...)
		if out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("node %s: nsenter %v: %w: %s", n.spec.name, args, err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// readyLine is what redis-server logs once it accepts connections.
const readyLine = "Ready to accept connections"
