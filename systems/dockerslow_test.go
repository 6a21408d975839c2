package systems

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A path between two servers slowed on the local Engine: the replica n2's connections to its
// primary n1 take the delay on a round trip, while the reverse path (n1's connections to n2),
// another replica's path to n1 and the harness's own connection to n1 do not; healed, the delay is
// gone, and neither a rule nor a bound queue is left in n2's namespace. A reader that dies with its
// rules still in place lets the path through undelayed (--queue-bypass), and jitter stays within
// its bounds.
func TestDockerSlowPeer(t *testing.T) {
	eng := dockerEngine(t)
	sys, closed := startDockerSystem(t, eng, "redis-sentinel", Config{Sentinel: SentinelConfig{Replicas: 2, Sentinels: 1}})
	s := sys.(*sentinelSys)
	d := s.backend.(*docker)
	ps, ok := sys.Backend().(PeerSlower)
	if !ok {
		t.Fatal("the local Engine's docker backend cannot slow the paths between servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr := map[string]string{}
	for _, n := range s.nodes {
		addr[n.Name] = n.Addr
	}
	// rtt is the median PING round trip on a connection from node's namespace to the server at
	// to ("" is the harness, from the host).
	rtt := func(from, to string) time.Duration { return medianPing(t, d, from, addr[to]) }
	slowOnePath(t, ctx, ps, d, addr, rtt, "n1")
	const delay = 200 * time.Millisecond

	// The reader dies (as with lockpick killed): the rules stay, and the path goes on undelayed.
	n2 := d.nodes["n2"]
	n2.op.Lock()
	n2.peer.slows["n1"].queue.conn.Close()
	n2.op.Unlock()
	if got := rtt("n2", "n1"); got > 100*time.Millisecond {
		t.Fatalf("n2->n1 with its reader gone takes %v a round trip: packets wait for nobody", got)
	}
	if st, err := ps.UnslowPeer(ctx, "n2", "n1"); err != nil || st.Passed == 0 {
		t.Fatalf("unslow after the reader died: %+v %v, want packets passed", st, err)
	}
	nothingQueued(t, d, "n2")

	// A slowdown left in place is stopped by Close.
	if err := ps.SlowPeer(ctx, "n3", "n1", delay, 0); err != nil {
		t.Fatal(err)
	}
	closed()
}

// The leader of an etcd cluster slowed on its peer paths both ways, as latency:paths=peers does:
// a write, which commits once a follower has acked the leader's append (the append goes on the
// follower's connection to the leader, the ack on the leader's to the follower: half a slowed
// path's delay each), takes the delay more; healed, it does not.
func TestDockerSlowPeerEtcd(t *testing.T) {
	eng := dockerEngine(t)
	srv, err := FindEtcd(context.Background(), EtcdSystem, nil)
	if err != nil {
		t.Skipf("etcd tests skipped: %v", err)
	}
	sys, closed := startDockerSystem(t, eng, "etcd", Config{Etcd: EtcdConfig{Server: srv.Path}})
	s := sys.(*etcdSys)
	ps := sys.Backend().(PeerSlower)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader := leaderOf(t, s)
	put := func() time.Duration {
		var rs []time.Duration
		for i := range 5 {
			began := time.Now()
			if _, err := s.admins[leader].Put(ctx, "k", strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
			rs = append(rs, time.Since(began))
		}
		slices.Sort(rs)
		return rs[len(rs)/2]
	}
	t.Logf("a write through the leader %s: %v", leader, put())
	var paths [][2]string
	for _, n := range s.nodes {
		if n.Name != leader {
			paths = append(paths, [2]string{leader, n.Name}, [2]string{n.Name, leader})
		}
	}
	const delay = 300 * time.Millisecond
	for _, p := range paths {
		if err := ps.SlowPeer(ctx, p[0], p[1], delay, 0); err != nil {
			t.Fatal(err)
		}
	}
	slowed := put()
	t.Logf("the leader's peer paths slowed by %v: a write takes %v", delay, slowed)
	if slowed < delay-20*time.Millisecond || slowed > 3*delay {
		t.Fatalf("the leader's peer paths slowed by %v: a write takes %v", delay, slowed)
	}
	for _, p := range paths {
		st, err := ps.UnslowPeer(ctx, p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s->%s: %+v", p[0], p[1], st)
	}
	if got := put(); got > delay/2 {
		t.Fatalf("healed, a write takes %v", got)
	}
	for _, n := range s.nodes {
		nothingQueued(t, s.backend.(*docker), n.Name)
	}
	closed()
}

// nsPids are backends whose nodes' network namespaces the tests enter, from this host: the local
// Engine's, and a remote one's that is the local Engine reached over TCP.
type nsPids interface{ nsPid(node string) int }

// nsPid is the pid of node's container, in its namespace.
func (b *docker) nsPid(node string) int { return b.session.Pid(context.Background(), node) }

// nsPid is the pid of node's holder, which holds its namespace.
func (b *dockerRemote) nsPid(node string) int {
	return b.session.Pid(context.Background(), node+"-net")
}

// medianPing is the median of pings' round trips.
// slowOnePath slows n2->n1 by 200 ms and checks that a round trip on that path takes it and none
// on n1->n2, n3->n1 or from the harness (to host) does; heals it and checks it fast again with
// nothing left queued; then checks that a jittered slowdown keeps every round trip within bounds.
func slowOnePath(t *testing.T, ctx context.Context, ps PeerSlower, d nsPids, addr map[string]string, rtt func(from, to string) time.Duration, host string) {
	t.Helper()
	paths := func() map[string]time.Duration {
		return map[string]time.Duration{"n2->n1": rtt("n2", "n1"), "n1->n2": rtt("n1", "n2"), "n3->n1": rtt("n3", "n1"), "host->n1": rtt("", host)}
	}
	t.Logf("before: %v", paths())
	const delay = 200 * time.Millisecond
	if err := ps.SlowPeer(ctx, "n2", "n1", delay, 0); err != nil {
		t.Fatal(err)
	}
	slowed := paths()
	t.Logf("n2->n1 slowed by %v: %v", delay, slowed)
	if got := slowed["n2->n1"]; got < delay-10*time.Millisecond || got > delay+150*time.Millisecond {
		t.Fatalf("n2->n1 slowed by %v: a round trip takes %v", delay, got)
	}
	for _, p := range []string{"n1->n2", "n3->n1", "host->n1"} {
		if slowed[p] > 100*time.Millisecond {
			t.Fatalf("%s, not slowed, takes %v a round trip", p, slowed[p])
		}
	}
	st, err := ps.UnslowPeer(ctx, "n2", "n1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("unslowed: %+v", st)
	if st.Delayed == 0 || st.Passed != 0 || st.Failed != 0 {
		t.Fatalf("the slowdown did %+v: want packets delayed, none passed or failed", st)
	}
	if got := rtt("n2", "n1"); got > 100*time.Millisecond {
		t.Fatalf("n2->n1 healed still takes %v a round trip", got)
	}
	nothingQueued(t, d, "n2")

	// Jitter: every round trip within delay +- jitter (each way half of each).
	if err := ps.SlowPeer(ctx, "n2", "n1", 100*time.Millisecond, 60*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, r := range pings(t, d, "n2", addr["n1"], 20) {
		if r < 35*time.Millisecond || r > 250*time.Millisecond {
			t.Fatalf("n2->n1 slowed by 100ms +- 60ms: a round trip took %v", r)
		}
	}
}

func medianPing(t *testing.T, d nsPids, from, addr string) time.Duration {
	rs := pings(t, d, from, addr, 7)
	slices.Sort(rs)
	return rs[len(rs)/2]
}

// pings times n PINGs, one after the other, on a connection to the redis server at addr opened in
// the network namespace of node from's container ("": the host's).
func pings(t *testing.T, d nsPids, from, addr string, n int) []time.Duration {
	t.Helper()
	c := dialFrom(t, d, from, addr)
	defer c.Close()
	r := bufio.NewReader(c)
	var out []time.Duration
	for range n {
		began := time.Now()
		c.SetDeadline(began.Add(5 * time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil || line != "+PONG\r\n" {
			t.Fatalf("PING %s from %s: %q %v", addr, from, line, err)
		}
		out = append(out, time.Since(began))
	}
	return out
}

// dialFrom connects to addr from the network namespace of node's container: a locked thread enters
// it, creates and connects the socket (which stays in that namespace), and goes back; a thread
// that cannot go back is left locked, so it dies with its goroutine.
func dialFrom(t *testing.T, d nsPids, node, addr string) net.Conn {
	t.Helper()
	if node == "" {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer home.Close()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", d.nsPid(node)))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("dial %s from %s: %v", addr, node, r.err)
	}
	return r.c
}

// nothingQueued fails unless node's namespace has no NFQUEUE rule and no queue bound.
func nothingQueued(t *testing.T, d nsPids, node string) {
	t.Helper()
	pid := strconv.Itoa(d.nsPid(node))
	out, err := exec.Command("nsenter", "-t", pid, "-n", "iptables", "-w", "-S").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -S in %s: %v: %s", node, err, out)
	}
	if strings.Contains(string(out), "NFQUEUE") {
		t.Fatalf("rules left in %s:\n%s", node, out)
	}
	// A bound queue is a line of its namespace's nfnetlink_queue; the file is absent before the
	// module's first use.
	bound, err := os.ReadFile("/proc/" + pid + "/net/netfilter/nfnetlink_queue")
	if err == nil && len(strings.TrimSpace(string(bound))) > 0 {
		t.Fatalf("queues still bound in %s: %s", node, bound)
	}
}

func TestQueuePackets(t *testing.T) {
	listing := `Chain OUTPUT (policy ACCEPT 0 packets, 0 bytes)
    pkts      bytes target     prot opt in     out     source               destination
      12      900 NFQUEUE    6    --  *      *       0.0.0.0/0            10.213.1.10          tcp dpt:6379 NFQUEUE num 1 bypass
       5      300 NFQUEUE    6    --  *      *       0.0.0.0/0            10.213.1.11          tcp dpt:6379 NFQUEUE num 12 bypass
       7      300 NFQUEUE    6    --  *      *       0.0.0.0/0            10.213.1.12          tcp dpt:6379 NFQUEUE num 1
`
	if got := queuePackets(listing, 1); got != 19 {
		t.Fatalf("queue 1: %d packets, want 19", got)
	}
}

// With jitter every packet is held for delay +- jitter, never below zero, and leaves no earlier
// than the packet ahead: a queue never reorders its path.
func TestDelayQueueKeepsOrder(t *testing.T) {
	q := &delayQueue{delay: 50 * time.Millisecond, jitter: 40 * time.Millisecond}
	now, last := time.Now(), time.Time{}
	for i := range 10000 {
		d := q.draw()
		if d < 10*time.Millisecond || d >= 90*time.Millisecond {
			t.Fatalf("draw %d: %v, want 50ms +- 40ms", i, d)
		}
		due := nextDue(last, now, d)
		if due.Before(last) || due.Before(now.Add(d)) {
			t.Fatalf("packet %d leaves at %v, the one ahead at %v", i, due, last)
		}
		last = due
		now = now.Add(100 * time.Microsecond)
	}
	if d := (&delayQueue{delay: 5 * time.Millisecond, jitter: 20 * time.Millisecond}).draw(); d < 0 {
		t.Fatalf("a negative hold: %v", d)
	}
}

// A remote reader's last line gives back its counts; any other line is no counts.
func TestParseDelayStats(t *testing.T) {
	st, err := parseDelayStats(delayStatsWord + " 12 3 1")
	if err != nil || st != (delayStats{Delayed: 12, Overflows: 3, Failed: 1}) {
		t.Fatalf("parse: %+v %v", st, err)
	}
	for _, bad := range []string{"ready 42", "", "nfqueue-stats 1 2"} {
		if _, err := parseDelayStats(bad); err == nil {
			t.Fatalf("%q parsed as counts", bad)
		}
	}
}
