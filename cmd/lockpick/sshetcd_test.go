package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/systems"
)

// skipWithoutEtcd skips a test whose hosts need etcd (the namespace hosts share this machine's
// programs).
func skipWithoutEtcd(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("skipping: no etcd for the hosts: scripts/install-deps.sh installs it (Debian's etcd-server)")
	}
}

// etcd over SSH, a member a host: the leader killed and kept down, and the leader cut from its
// peers by rules on the hosts, are checked as on loopback: both valid, with grants inside the
// faults (a run whose faults exercised nothing fails the expectation).
func TestSSHEtcdScenarios(t *testing.T) {
	skipWithoutEtcd(t)
	hosts := upSSHHosts(t, 3)
	bin := build(t)
	args := append([]string{"scenario", "etcd-leader-kill", "etcd-partition-leader", "--backend", "ssh",
		"--store", t.TempDir()}, hosts.flags()...)
	out, err := exec.Command(bin, args...).CombinedOutput()
	if code := exitCode(err); code != 0 || !bytes.Contains(out, []byte("2 met, 0 not met")) {
		t.Fatalf("lockpick %s: exit %d, want both scenarios met:\n%s", strings.Join(args, " "), code, out)
	}
	assertNoLeftovers(t, hosts)
}

// Latency between etcd members over SSH is a packet queue on the caller's host: measured on the
// hosts' own interfaces, a TCP connect from e1's host to e2's peer port takes about the delay more
// while the path e1->e2 is slowed, and as before once it is restored; the other direction (e2's
// host to e1's peer port) is untouched; the rules are on e1's host only, and go with the slowdown.
func TestSSHEtcdPeerLatencyOnTheHostsInterface(t *testing.T) {
	skipWithoutEtcd(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("skipping: no curl to time a connect from a host")
	}
	hosts := upSSHHosts(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := hosts.config("latency-test")
	cfg.Lockpick = build(t)
	sys, err := systems.Start(ctx, "etcd", systems.Config{Dir: t.TempDir(), Groups: []string{"g0"}, Direct: true,
		Etcd: systems.EtcdConfig{Members: 3}, Backend: systems.BackendSSH, SSH: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	slower, ok := sys.Backend().(systems.PeerSlower)
	if !ok {
		t.Fatal("etcd over ssh slows no path between members")
	}
	const delay = 200 * time.Millisecond
	e1Peer, e2Peer := peerURL(hosts.addrs[0], 1), peerURL(hosts.addrs[1], 1)
	before := connectTime(t, "lp-h1", e2Peer)
	if err := slower.SlowPeer(ctx, "e1", "e2", delay, 0); err != nil {
		t.Fatal(err)
	}
	if n := hostRules(t, "lp-h1"); n != 2 {
		t.Errorf("%d rules of lockpick on e1's host, want 2 (OUTPUT and INPUT)", n)
	}
	for _, ns := range []string{"lp-h2", "lp-h3"} {
		if n := hostRules(t, ns); n != 0 {
			t.Errorf("%d rules of lockpick on %s, which slows nothing", n, ns)
		}
	}
	during := connectTime(t, "lp-h1", e2Peer)
	reverse := connectTime(t, "lp-h2", e1Peer)
	st, err := slower.UnslowPeer(ctx, "e1", "e2")
	if err != nil {
		t.Fatal(err)
	}
	after := connectTime(t, "lp-h1", e2Peer)
	t.Logf("connect e1's host -> e2's peer port: before %v, during %v, after %v; e2's host -> e1's during %v; %+v", before, during, after, reverse, st)
	if during < before+delay*9/10 {
		t.Errorf("a connect on the slowed path took %v (before: %v): the delay %v did not land", during, before, delay)
	}
	if after > before+delay/2 || reverse > before+delay/2 {
		t.Errorf("after the slowdown %v, the other direction during it %v (before: %v): slowed where it should not be", after, reverse, before)
	}
	if st.Delayed == 0 {
		t.Errorf("the reader delayed no packet: %+v", st)
	}
	if n := hostRules(t, "lp-h1"); n != 0 {
		t.Errorf("%d rules left on e1's host after the slowdown", n)
	}
}

// peerURL is the peer URL of the k-th member on a host (its port plus SSHPeerPortOffset).
func peerURL(host string, k int) string {
	return fmt.Sprintf("http://%s:%d/version", host, 17000+k+systems.SSHPeerPortOffset)
}

// connectTime is the TCP connect time of a request from a namespace host to url, by curl.
func connectTime(t *testing.T, ns, url string) time.Duration {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "curl", "-s", "-o", "/dev/null", "--max-time", "5",
		"-w", "%{time_connect}", url).Output()
	if err != nil {
		t.Fatalf("curl %s from %s: %v (%s)", url, ns, err, out)
	}
	s, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		t.Fatalf("curl's connect time %q: %v", out, err)
	}
	return time.Duration(s * float64(time.Second)).Round(10 * time.Microsecond)
}

// A run of etcd killed by SIGKILL while a path between members is slowed leaves the members, the
// queue reader and the rules on the hosts; lockpick clean --backend ssh removes them all.
func TestSSHEtcdKilledRunCleaned(t *testing.T) {
	skipWithoutEtcd(t)
	hosts := upSSHHosts(t, 3)
	bin := build(t)
	args := append([]string{"run", "--backend", "ssh", "--lock", "etcd", "--nemesis", "latency:paths=peers:delay=200ms:duration=20s:interval=1s",
		"--time-limit", "60s", "--seed", "1", "--store", t.TempDir()}, hosts.flags()...)
	cmd, _ := startUntilCut(t, bin, args)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	left, err := systems.SurveySSH(context.Background(), hosts.config(""))
	if err != nil {
		t.Fatal(err)
	}
	var members, readers, rules int
	for _, l := range left {
		for _, p := range l.Processes {
			members += strings.Count(p, "--initial-cluster-token")
			readers += strings.Count(p, "nfqueue-delay")
		}
		rules += len(l.Rules)
	}
	if members != 3 || readers == 0 || rules == 0 {
		t.Fatalf("SIGKILL left %d members, %d queue readers and %d rules: want 3 and some of each (the run was not killed in a slowdown)\n%v", members, readers, rules, left)
	}
	cleanOut := cleanHosts(t, bin, hosts)
	t.Logf("left by SIGKILL: %d members, %d readers, %d rules; clean said:\n%s", members, readers, rules, cleanOut)
	assertNoLeftovers(t, hosts)
}

// --dry-run of etcd over ssh logs in nowhere and says where each member and its peer port go, and
// what the faults between members put on the hosts (rules, the uploaded queue reader); a slowdown
// between members with fewer hosts than members is refused in one line.
func TestDryRunEtcdOverSSH(t *testing.T) {
	bin := build(t)
	pins := []string{"--ssh-key", "main_test.go", "--ssh-fingerprint", "SHA256:a,SHA256:b,SHA256:c"}
	args := append([]string{"run", "--backend", "ssh", "--hosts", "10.0.0.5,10.0.0.6,10.0.0.7", "--lock", "etcd",
		"--nemesis", "latency:paths=peers,partition:paths=peers", "--dry-run", "--store", t.TempDir()}, pins...)
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("lockpick %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, want := range []string{"host 10.0.0.6: e2 (etcd on port 17001, peers on 18001)",
		"cuts between servers: iptables rules on the calling node's host", "latency between servers: lockpick's own binary uploaded"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the dry run does not say %q:\n%s", want, out)
		}
	}
	args = []string{"run", "--backend", "ssh", "--hosts", "10.0.0.5", "--lock", "etcd", "--nemesis", "latency:paths=peers",
		"--dry-run", "--store", t.TempDir(), "--ssh-key", "main_test.go", "--ssh-fingerprint", "SHA256:a"}
	out, err = exec.Command(bin, args...).CombinedOutput()
	if code := exitCode(err); code != 255 || !bytes.Contains(out, []byte("give a host per node (1 --hosts for 3 nodes)")) {
		t.Errorf("latency between members on one host: exit %d, want 255 and a host per node:\n%s", code, out)
	}
}
