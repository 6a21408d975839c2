package systems

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/containers"
)

// Latency between servers on a remote Engine: the rules of the local Engine (slowRules), in the
// caller's holder, and the same reader (RunDelayQueue), run there by lockpick's own binary, which
// the node image packs: `lockpick internal nfqueue-delay`, in the holder's namespace already. It
// says when its queue is bound, is stopped with SIGTERM from the holder's kept shell, and writes
// what it did as its last line; it also stops when its input ends (lockpick gone), and dies with
// the holder at the latest.

// DelayQueueArgs are the arguments of lockpick (after its path) that run the reader of queue num.
func DelayQueueArgs(num uint16, delay, jitter time.Duration) []string {
	return []string{"internal", "nfqueue-delay", "--queue", strconv.Itoa(int(num)), "--delay", delay.String(), "--jitter", jitter.String()}
}

// remoteReader is a reader running in a holder: its output, and its pid there.
type remoteReader struct {
	out *containers.Stream
	pid int
}

// SlowPeer implements PeerSlower.
func (b *dockerRemote) SlowPeer(ctx context.Context, from, to string, delay, jitter time.Duration) error {
	f, t, err := b.nodePair(from, to)
	if err != nil {
		return err
	}
	if err := checkSlow(from, to, t.peer, delay, jitter); err != nil {
		return err
	}
	if b.tools["lockpick"] == "" {
		return fmt.Errorf("slow %s->%s: the node image holds no iptables: %w", from, to, RemoteNetToolsMissing())
	}
	f.op.Lock()
	defer f.op.Unlock()
	if _, ok := f.peer.slows[to]; ok {
		return nil // in effect already
	}
	num := b.queues.of(from, to)
	r, err := b.startReader(ctx, f, num, delay/2, jitter/2)
	if err != nil {
		return fmt.Errorf("slow %s->%s: %w", from, to, err)
	}
	rules := slowRules(t.peer.ip, t.peer.port, num)
	if err := b.holderIptables(ctx, f, "-A", rules); err != nil {
		// Some of the rules may have landed: take them out (those that did not fail to go).
		_ = b.holderIptables(context.WithoutCancel(ctx), f, "-D", rules)
		_, _ = b.stopReader(context.WithoutCancel(ctx), f, r)
		return fmt.Errorf("slow %s->%s: %w", from, to, err)
	}
	f.peer.slows[to] = &peerSlow{num: num, remote: r}
	return nil
}

// checkSlow checks a slowdown's path and its delay, as both docker backends do.
func checkSlow(from, to string, t dockerPeer, delay, jitter time.Duration) error {
	if t.port == 0 {
		return fmt.Errorf("slow %s->%s: %s is called by no other server", from, to, to)
	}
	if delay <= 0 || jitter < 0 {
		return fmt.Errorf("slow %s->%s: delay %v and jitter %v: give a positive delay and a jitter of 0 or more", from, to, delay, jitter)
	}
	return nil
}

// startReader starts the reader of queue num in n's holder and waits until it has bound the queue.
func (b *dockerRemote) startReader(ctx context.Context, n *tableNode, num uint16, delay, jitter time.Duration) (*remoteReader, error) {
	cmd := append([]string{b.tools["lockpick"]}, DelayQueueArgs(num, delay, jitter)...)
	out, err := b.session.StreamNet(ctx, n.spec.name, cmd)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.spec.name, err)
	}
	line, err := out.Line(time.Now().Add(20 * time.Second))
	pid, perr := strconv.Atoi(strings.TrimPrefix(line, "ready "))
	if err != nil || perr != nil || !strings.HasPrefix(line, "ready ") {
		out.Close()
		return nil, fmt.Errorf("node %s: the queue reader did not start: %q %v", n.spec.name, line, err)
	}
	return &remoteReader{out: out, pid: pid}, nil
}

// stopReader ends a reader with SIGTERM from n's holder shell, and reads what it did. A reader that
// ended already (killed) has no counts to give: its packets passed undelayed since
// (--queue-bypass), and that is the error.
func (b *dockerRemote) stopReader(ctx context.Context, n *tableNode, r *remoteReader) (delayStats, error) {
	defer r.out.Close()
	// Its failure (no such process) is told by the missing counts.
	_, _ = b.sh(ctx, n, inHolder, "kill -TERM "+strconv.Itoa(r.pid)+" 2>/dev/null")
	last, err := r.out.Last(time.Now().Add(10 * time.Second))
	if err != nil {
		return delayStats{}, fmt.Errorf("node %s: the queue reader's end: %w", n.spec.name, err)
	}
	st, err := parseDelayStats(last)
	if err != nil {
		return delayStats{}, fmt.Errorf("node %s: the queue reader ended before it was stopped (its packets passed undelayed since): %w", n.spec.name, err)
	}
	return st, nil
}

// UnslowPeer implements PeerSlower.
func (b *dockerRemote) UnslowPeer(ctx context.Context, from, to string) (PeerSlowStats, error) {
	f, t, err := b.nodePair(from, to)
	if err != nil {
		return PeerSlowStats{}, err
	}
	return unslowPath(b.log, slowedNode{from, &f.op, &f.peer}, to, func(s *peerSlow) (PeerSlowStats, error) {
		// The counters first, then the rules, then the reader, as on the local Engine.
		matched, cerr := b.queueCounter(ctx, f, s.num)
		err := b.holderIptables(ctx, f, "-D", slowRules(t.peer.ip, t.peer.port, s.num))
		qs, rerr := b.stopReader(ctx, f, s.remote)
		return slowStats(matched, cerr, qs), errors.Join(err, rerr)
	})
}

// queueCounter is how many packets the rules sending to queue num matched so far, in n's holder.
func (b *dockerRemote) queueCounter(ctx context.Context, n *tableNode, num uint16) (uint64, error) {
	ipt := b.tools["iptables"] + " -w -L "
	out, err := b.sh(ctx, n, inHolder, ipt+"OUTPUT -n -v -x && "+ipt+"INPUT -n -v -x")
	if err != nil {
		return 0, fmt.Errorf("node %s: %w", n.spec.name, err)
	}
	return queuePackets(out, num), nil
}

// unslowAll stops every slowdown still in place (the run's end, whatever healed or not).
func (b *dockerRemote) unslowAll(ctx context.Context) error {
	return unslowEvery(ctx, b.slowedNodes(), b.UnslowPeer)
}

// exe is lockpick's own binary, which a remote node image packs to run the queue reader.
func exe() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("latency between servers on a remote Engine packs lockpick's own binary into the node image: %w", err)
	}
	return p, nil
}
