package systems

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// PeerSlower slows the paths between servers where they run, as PeerCutter cuts them: on the local
// Engine's docker backend, the packets of a path (the caller's connections to the callee's server
// port, exactly what CutPeer matches) go through an NFQUEUE queue of their own in the caller's
// network namespace, and a reader in lockpick's process holds each for its delay before letting it
// go. As a link's latency toxic does, half the delay and half the jitter are added to each
// direction (what the caller sends, in OUTPUT, and what comes back, in INPUT), so a round trip on
// the path grows by delay, and the path's other direction (to -> from) is left alone.
type PeerSlower interface {
	// SlowPeer slows the path from one node to another by delay (plus or minus jitter) a round
	// trip. A slowdown outlives restarts of either node; a path slowed already stays as it is.
	SlowPeer(ctx context.Context, from, to string, delay, jitter time.Duration) error
	// UnslowPeer removes the slowdown of the path from one node to another, if any: its rules
	// first, then its reader, which lets out at once what it still holds. It says what the
	// slowdown did.
	UnslowPeer(ctx context.Context, from, to string) (PeerSlowStats, error)
}

// PeerSlowStats is what a slowdown of a path did.
type PeerSlowStats struct {
	// Delayed are the packets held for the delay; Passed those that matched its rules but went
	// undelayed (the queue was full and failed open, or no reader listened and the rules'
	// --queue-bypass let them through); Failed those whose release the kernel refused (dropped
	// when the queue closed: TCP sends them again).
	Delayed, Passed, Failed uint64
}

// peerSlow is a slowdown in place: its queue number and its reader, in lockpick's process (the
// local Engine), in the caller's holder (a remote one) or on the caller's host (ssh).
type peerSlow struct {
	num    uint16
	queue  *delayQueue
	remote *remoteReader
	ssh    *sshReader
}

// slowRules are the rules, in the caller's namespace, that send its connections to ip:port to
// queue num. --queue-bypass: with no reader bound (lockpick killed), the packets pass rather than
// being dropped, so a dead reader never cuts a path.
func slowRules(ip string, port int, num uint16) [][]string {
	out, in := peerMatch(ip, port)
	q := []string{"-j", "NFQUEUE", "--queue-num", strconv.Itoa(int(num)), "--queue-bypass"}
	return [][]string{append(out, q...), append(in, q...)}
}

// SlowPeer implements PeerSlower.
func (b *docker) SlowPeer(ctx context.Context, from, to string, delay, jitter time.Duration) error {
	f, t, err := b.nodePair(from, to)
	if err != nil {
		return err
	}
	if err := checkSlow(from, to, t.peer, delay, jitter); err != nil {
		return err
	}
	if err := NetToolsMissing(); err != nil {
		return fmt.Errorf("slow %s->%s: %w", from, to, err)
	}
	f.op.Lock()
	defer f.op.Unlock()
	if _, ok := f.peer.slows[to]; ok {
		return nil // in effect already
	}
	s, err := b.startSlow(ctx, from, to, t.peer, delay, jitter)
	if err != nil {
		return fmt.Errorf("slow %s->%s: %w", from, to, err)
	}
	f.peer.slows[to] = s
	return nil
}

// startSlow starts the reader of the path's queue in from's namespace, then sends the path there;
// the reader comes first so that no packet waits for one.
func (b *docker) startSlow(ctx context.Context, from, to string, t dockerPeer, delay, jitter time.Duration) (*peerSlow, error) {
	pid := b.session.Pid(ctx, from)
	if pid == 0 {
		return nil, fmt.Errorf("node %s: its container does not run", from)
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", from, err)
	}
	defer ns.Close()
	num := b.queues.of(from, to)
	q, err := startDelayQueue(ns, num, delay/2, jitter/2)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", from, err)
	}
	rules := slowRules(t.ip, t.port, num)
	if err := b.nsIptables(ctx, from, "-A", rules); err != nil {
		// Some of the rules may have landed: take them out (those that did not fail to go).
		_ = b.nsIptables(context.WithoutCancel(ctx), from, "-D", rules)
		q.close()
		return nil, err
	}
	return &peerSlow{num: num, queue: q}, nil
}

// queueNums are the NFQUEUE numbers of the paths a run slowed so far (from->to), one per path.
type queueNums struct {
	mu sync.Mutex
	m  map[string]uint16
}

// of is the NFQUEUE number of the path from -> to, the same for the whole run.
func (q *queueNums) of(from, to string) uint16 {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := from + "->" + to
	if n, ok := q.m[key]; ok {
		return n
	}
	if q.m == nil {
		q.m = map[string]uint16{}
	}
	n := uint16(len(q.m) + 1)
	q.m[key] = n
	return n
}

// UnslowPeer implements PeerSlower.
func (b *docker) UnslowPeer(ctx context.Context, from, to string) (PeerSlowStats, error) {
	f, t, err := b.nodePair(from, to)
	if err != nil {
		return PeerSlowStats{}, err
	}
	return unslowPath(b.log, slowedNode{from, &f.op, &f.peer}, to, func(s *peerSlow) (PeerSlowStats, error) {
		return b.stopSlow(ctx, from, t.peer, s)
	})
}

// unslowPath takes the slowdown of the path from n to `to` out of n's bookkeeping and ends it with
// stop, under n's op lock; a path not slowed is nothing to do. The slowdown is forgotten whatever
// stop returns: with --queue-bypass a rule left behind lets its packets through.
func unslowPath(log *slog.Logger, n slowedNode, to string, stop func(*peerSlow) (PeerSlowStats, error)) (PeerSlowStats, error) {
	n.op.Lock()
	defer n.op.Unlock()
	s, ok := n.peer.slows[to]
	if !ok {
		return PeerSlowStats{}, nil
	}
	delete(n.peer.slows, to)
	st, err := stop(s)
	if err != nil {
		return st, fmt.Errorf("unslow %s->%s: %w", n.name, to, err)
	}
	log.Debug("peer latency removed", "from", n.name, "to", to, "queue", s.num,
		"delayed", st.Delayed, "passed", st.Passed, "failed", st.Failed)
	return st, nil
}

// stopSlow reads the rules' counters, removes the rules, then stops the reader.
func (b *docker) stopSlow(ctx context.Context, from string, t dockerPeer, s *peerSlow) (PeerSlowStats, error) {
	matched, cerr := b.queueCounter(ctx, from, s.num)
	err := b.nsIptables(ctx, from, "-D", slowRules(t.ip, t.port, s.num))
	return slowStats(matched, cerr, s.queue.close()), err
}

// slowStats is what a slowdown did, from its reader's counts and the packets its rules matched
// (unless counting them failed, cerr): those neither delayed nor failed passed undelayed.
func slowStats(matched uint64, cerr error, qs delayStats) PeerSlowStats {
	st := PeerSlowStats{Delayed: qs.Delayed, Failed: qs.Failed}
	if cerr == nil && matched > qs.Delayed+qs.Failed {
		st.Passed = matched - qs.Delayed - qs.Failed
	}
	return st
}

// queueCounter is how many packets the rules sending to queue num matched so far, in node's
// namespace.
func (b *docker) queueCounter(ctx context.Context, node string, num uint16) (uint64, error) {
	pid := b.session.Pid(ctx, node)
	if pid == 0 {
		return 0, fmt.Errorf("node %s: its container does not run", node)
	}
	var total uint64
	for _, chain := range []string{"OUTPUT", "INPUT"} {
		args := []string{"-t", strconv.Itoa(pid), "-n", "iptables", "-w", "-L", chain, "-n", "-v", "-x"}
		out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("node %s: nsenter %v: %w: %s", node, args, err, bytes.TrimSpace(out))
		}
		total += queuePackets(string(out), num)
	}
	return total, nil
}

// queuePackets sums the packet counters of the lines of `iptables -L -n -v -x` that send to queue
// num ("... NFQUEUE num 3 bypass").
func queuePackets(listing string, num uint16) uint64 {
	want := "NFQUEUE num " + strconv.Itoa(int(num)) + " "
	var total uint64
	for line := range strings.Lines(listing) {
		if !strings.Contains(strings.TrimSpace(line)+" ", want) {
			continue
		}
		fields := strings.Fields(line)
		if n, err := strconv.ParseUint(fields[0], 10, 64); err == nil {
			total += n
		}
	}
	return total
}

// unslowAll stops every slowdown still in place (the run's end, whatever healed or not): readers
// must not outlive the backend.
func (b *docker) unslowAll(ctx context.Context) error {
	return unslowEvery(ctx, b.slowedNodes(), b.UnslowPeer)
}

// slowedNodes are the table's nodes as unslowEvery sees them.
func (t *table) slowedNodes() []slowedNode {
	t.mu.Lock()
	defer t.mu.Unlock()
	nodes := make([]slowedNode, 0, len(t.nodes))
	for _, n := range t.nodes {
		nodes = append(nodes, slowedNode{n.spec.name, &n.op, &n.peer})
	}
	return nodes
}

// slowedNode is what unslowEvery needs of a node of either docker backend: its name, the lock that
// guards its paths, and its paths.
type slowedNode struct {
	name string
	op   *sync.Mutex
	peer *dockerPeer
}

// unslowEvery stops the slowdown of every path still slowed from nodes, with unslow.
func unslowEvery(ctx context.Context, nodes []slowedNode, unslow func(ctx context.Context, from, to string) (PeerSlowStats, error)) error {
	var errs []error
	for _, n := range nodes {
		n.op.Lock()
		tos := slices.Collect(maps.Keys(n.peer.slows))
		n.op.Unlock()
		for _, to := range tos {
			if _, err := unslow(ctx, n.name, to); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
