package harness

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockpick-dev/lockpick/nemesis"
	"github.com/lockpick-dev/lockpick/systems"
)

// resolveSSH checks the options of the ssh backend: hosts, a key, and a way to check every host's
// key (known_hosts, or a fingerprint per host), with the user's defaults filled in; on another
// backend none of them may be given.
func (c *Config) resolveSSH() error {
	if err := c.resolveHostClock(); err != nil {
		return err
	}
	if c.Backend != systems.BackendSSH {
		if len(c.SSHHosts) > 0 || c.SSHUser != "" || c.SSHKey != "" || c.SSHKnownHosts != "" || len(c.SSHFingerprints) > 0 {
			return fmt.Errorf("--hosts and --ssh-* say where and how --backend ssh runs the nodes, and the backend is %s: drop them, or add --backend ssh", c.Backend)
		}
		return nil
	}
	if len(c.SSHHosts) == 0 {
		return fmt.Errorf("--backend ssh runs the nodes on hosts of yours: add --hosts HOST[,HOST...] (docs/ssh.md)")
	}
	if c.BasePort != 0 {
		return fmt.Errorf("--base-port chooses ports on this host, and --backend ssh nodes listen on the hosts (from port 17001 on each): drop --base-port")
	}
	if f, ok := c.faultNeeding(nemesis.PeerCuts); ok && len(c.SSHHosts) < len(c.layout()) {
		return fmt.Errorf("--nemesis %s cuts paths between servers with iptables on the caller's host, which would cut every node there: give a host per node (%d --hosts for %d nodes)", f.Name(), len(c.SSHHosts), len(c.layout()))
	}
	if f, ok := c.faultNeeding(nemesis.PeerLatency); ok && len(c.SSHHosts) < len(c.layout()) {
		return fmt.Errorf("--nemesis %s slows paths between servers with iptables on the caller's host, which would slow every node there: give a host per node (%d --hosts for %d nodes)", f.Name(), len(c.SSHHosts), len(c.layout()))
	}
	c.SSHUser = cmp.Or(c.SSHUser, "root")
	home, _ := os.UserHomeDir()
	if c.SSHKey == "" {
		for _, k := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			if p := filepath.Join(home, ".ssh", k); fileExists(p) {
				c.SSHKey = p
				break
			}
		}
		if c.SSHKey == "" {
			return fmt.Errorf("--backend ssh logs in with a key, and ~/.ssh has none: add --ssh-key FILE (a key without a passphrase)")
		}
	}
	if !fileExists(c.SSHKey) {
		return fmt.Errorf("--ssh-key %s: no such file: give the private key lockpick logs in with", c.SSHKey)
	}
	return c.resolveHostKeys(home)
}

// resolveHostClock checks --allow-host-clock against the faults: moving the hosts' real clocks is
// the user's to allow, explicitly, and the flag means nothing without a fault that does.
func (c *Config) resolveHostClock() error {
	f, moves := c.faultNeeding(nemesis.HostClocks)
	switch {
	case c.AllowHostClock != "" && c.AllowHostClock != systems.HostClockOwn && c.AllowHostClock != systems.HostClockShared:
		return fmt.Errorf("--allow-host-clock=%s: use --allow-host-clock (hosts with kernels of their own) or --allow-host-clock=shared (also hosts that share a kernel with each other or this machine)", c.AllowHostClock)
	case moves && c.AllowHostClock == "":
		return fmt.Errorf("--nemesis %s steps and slews the real clocks of the --hosts as root (every process there sees it; restored at the heal, the run's end and by lockpick clean): allow it with --allow-host-clock (docs/ssh.md)", f)
	case !moves && c.AllowHostClock != "":
		return fmt.Errorf("--allow-host-clock allows clock:source=host, and no --nemesis moves the hosts' clocks: drop it, or add --nemesis clock:source=host")
	}
	return nil
}

// resolveHostKeys checks that every host's key can be checked: a fingerprint per host, or a
// known_hosts file that exists.
func (c *Config) resolveHostKeys(home string) error {
	if len(c.SSHFingerprints) > 0 {
		if c.SSHKnownHosts != "" {
			return fmt.Errorf("--ssh-fingerprint and --ssh-known-hosts both check the hosts' keys: give one of them")
		}
		if len(c.SSHFingerprints) != len(c.SSHHosts) {
			return fmt.Errorf("--ssh-fingerprint gives %d fingerprints for %d --hosts: give one per host, in the order of --hosts", len(c.SSHFingerprints), len(c.SSHHosts))
		}
		for _, f := range c.SSHFingerprints {
			if !strings.HasPrefix(f, "SHA256:") {
				return fmt.Errorf("--ssh-fingerprint %s: not a SHA256 fingerprint: give it as ssh-keygen -lf prints it (SHA256:...)", f)
			}
		}
		return nil
	}
	c.SSHKnownHosts = cmp.Or(c.SSHKnownHosts, filepath.Join(home, ".ssh", "known_hosts"))
	if !fileExists(c.SSHKnownHosts) {
		return fmt.Errorf("--ssh-known-hosts %s: no such file: list the hosts' keys there (checked, e.g. with ssh-keyscan) or pin them with --ssh-fingerprint", c.SSHKnownHosts)
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// sshConfig is the systems side of the ssh options, for the run in dir.
func (c *Config) sshConfig(dir string) (systems.SSHConfig, error) {
	sc := systems.SSHConfig{Hosts: c.SSHHosts, User: c.SSHUser, Key: c.SSHKey, KnownHosts: c.SSHKnownHosts,
		Fingerprints: c.SSHFingerprints, Run: filepath.Base(dir)}
	_, slows := c.faultNeeding(nemesis.PeerLatency)
	if _, ok := c.faultNeeding(nemesis.HostClocks); ok {
		sc.HostClock = c.AllowHostClock
	}
	if slows || sc.HostClock != "" {
		// The hosts read the slowed paths' packet queues and move their clocks with this binary
		// (docs/ssh.md).
		exe, err := os.Executable()
		if err != nil {
			return sc, fmt.Errorf("latency between servers and host clocks over ssh upload lockpick's own binary to the hosts: %w", err)
		}
		sc.Lockpick = exe
	}
	return sc, nil
}

// SSHTarget is the hosts and credentials of c's ssh options, with the defaults filled in and
// checked as a run checks them: what lockpick clean --backend ssh logs in with.
func (c Config) SSHTarget() (systems.SSHConfig, error) {
	c.Backend = systems.BackendSSH
	if err := c.resolveSSH(); err != nil {
		return systems.SSHConfig{}, err
	}
	return c.sshConfig("")
}

// SSHOptionNames are the options of the ssh backend, as flags.
func SSHOptionNames() []string {
	return []string{"hosts", "ssh-user", "ssh-key", "ssh-known-hosts", "ssh-fingerprint"}
}

// dryRunSSH says per host what a run on the ssh backend starts there, which ports and rules it
// touches and what it removes at the end.
func (c *Config) dryRunSSH(p func(format string, args ...any)) {
	p("  as %s over SSH (keys checked against %s), nodes placed round-robin on %d hosts:", c.SSHUser, cmp.Or(c.SSHKnownHosts, "the --ssh-fingerprint pins"), len(c.SSHHosts))
	placed := systems.PlaceOnHosts(c.SSHHosts, c.layout())
	tr := c.traits()
	for _, h := range c.SSHHosts {
		var nodes []string
		for _, n := range placed[h] {
			if tr.Server == "etcd-server" { // a member's peers call it on a port of its own
				nodes = append(nodes, fmt.Sprintf("%s (etcd on port %d, peers on %d)", n.Name, n.Port, n.Port+systems.SSHPeerPortOffset))
				continue
			}
			nodes = append(nodes, fmt.Sprintf("%s (%s on port %d)", n.Name, tr.Server, n.Port))
		}
		p("  host %s: %s, under %s/RUN", h, strings.Join(nodes, ", "), systems.SSHHostDir(h))
	}
	if _, ok := c.faultNeeding(nemesis.NetCuts); ok {
		p("  cuts: iptables rules on the node's host (INPUT from this host to the node's port, OUTPUT back), commented %sRUN, removed at the heal and at the end", systems.SSHRuleTag)
	}
	if _, ok := c.faultNeeding(nemesis.PeerCuts); ok {
		p("  cuts between servers: iptables rules on the calling node's host (OUTPUT to the callee's host and port, INPUT back), commented %sRUN", systems.SSHRuleTag)
	}
	if _, ok := c.faultNeeding(nemesis.PeerLatency); ok {
		p("  latency between servers: lockpick's own binary uploaded to each host's run directory, run there as the reader of an NFQUEUE queue per slowed path (rules on the calling node's host, commented %sRUN)", systems.SSHRuleTag)
	}
	if _, ok := c.faultNeeding(nemesis.NodeClocks); ok {
		p("  clocks: the clock shim is uploaded to each host's run directory and each node's clock file is written in place there")
	}
	if _, ok := c.faultNeeding(nemesis.HostClocks); ok {
		c.dryRunHostClock(p)
	}
	p("  at the end: every node killed, its *.log copied into the run's store, the run's rules and directory removed on every host (after a killed run: lockpick clean --backend ssh --hosts ...)")
}

// dryRunHostClock says per host how the host clock fault moves its real clock and puts it back.
func (c *Config) dryRunHostClock(p func(format string, args ...any)) {
	shared := "refused if any two hosts, or a host and this machine, share a kernel (boot_id)"
	if c.AllowHostClock == systems.HostClockShared {
		shared = "hosts sharing a kernel (boot_id) move together, once, and one on this machine's kernel moves the harness's clock too"
	}
	for _, h := range c.SSHHosts {
		p("  host %s: its real clock (CLOCK_REALTIME) stepped and slewed as root by lockpick's own binary in %s/RUN (adjtimex), the net offset and the tick and frequency found recorded in %s/RUN/%s; put back at each heal, at the run's end, and by lockpick clean after a killed run",
			h, systems.SSHHostDir(h), systems.SSHHostDir(h), systems.HostClockRecordName)
	}
	p("  host clocks: %s; refused where a time daemon (chronyd, ntpd, systemd-timesyncd) runs", shared)
}

// OverrideSSH sets on c the ssh options that from gives (the flags given with a scenario file).
func (c *Config) OverrideSSH(from Config) {
	if len(from.SSHHosts) > 0 {
		c.SSHHosts = from.SSHHosts
	}
	if len(from.SSHFingerprints) > 0 {
		c.SSHFingerprints = from.SSHFingerprints
	}
	c.SSHUser = cmp.Or(from.SSHUser, c.SSHUser)
	c.SSHKey = cmp.Or(from.SSHKey, c.SSHKey)
	c.SSHKnownHosts = cmp.Or(from.SSHKnownHosts, c.SSHKnownHosts)
	c.AllowHostClock = cmp.Or(from.AllowHostClock, c.AllowHostClock)
}
