package systems

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/sshhost"
)

// Latency between servers on the ssh backend: the rules of the docker backends (slowRules: the
// caller's connections to the callee's host and port, sent to an NFQUEUE queue of the path's own)
// on the caller's host, tagged with the run's comment, and the same reader (RunDelayQueue) run
// there by lockpick's own binary, uploaded at the start into the run's directory on every host
// (SSHConfig.Lockpick; the hosts need the control machine's architecture and C library, as for
// the clock shim). A reader runs detached like a node, in the run's directory, so clean finds it
// as it finds a server; it says when its queue is bound in its log, is stopped with SIGTERM and
// writes what it did as its last line there. Its input is /dev/null, so it waits for the signal
// alone (--until-signal): a killed run leaves it and its rules, which clean removes both.

// sshReader is a queue reader running on a host: its pid and its log there.
type sshReader struct {
	pid int
	log string
}

// SlowPeer implements PeerSlower.
func (r *sshRunner) SlowPeer(ctx context.Context, from, to string, delay, jitter time.Duration) error {
	f, t, err := r.nodePair(from, to)
	if err != nil {
		return err
	}
	if err := checkSlow(from, to, t.peer, delay, jitter); err != nil {
		return err
	}
	m := f.host.(*sshNode).m
	if m.lockpick == "" {
		return fmt.Errorf("slow %s->%s: lockpick's binary was not uploaded to %s (the run asked for no latency between servers)", from, to, m.name)
	}
	f.op.Lock()
	defer f.op.Unlock()
	if _, ok := f.peer.slows[to]; ok {
		return nil // in effect already
	}
	num := r.queues.of(from, to)
	rd, err := r.startReader(ctx, m, num, delay/2, jitter/2)
	if err != nil {
		return fmt.Errorf("slow %s->%s: %w", from, to, err)
	}
	rules := slowRules(t.peer.ip, t.peer.port, num)
	if err := r.hostIptables(ctx, f, "-A", rules); err != nil {
		// Some of the rules may have landed: take them out (those that did not fail to go).
		_ = r.hostIptables(context.WithoutCancel(ctx), f, "-D", rules)
		_, _ = r.stopReader(context.WithoutCancel(ctx), m, rd)
		return fmt.Errorf("slow %s->%s: %w", from, to, err)
	}
	f.peer.slows[to] = &peerSlow{num: num, ssh: rd}
	return nil
}

// startReader starts the reader of queue num on m and waits until its log says it bound the
// queue (at most 20 s, or until it ended).
func (r *sshRunner) startReader(ctx context.Context, m *sshMachine, num uint16, delay, jitter time.Duration) (*sshReader, error) {
	logFile := path.Join(m.dir, fmt.Sprintf("nfqueue-%d.log", num))
	if _, err := m.h.Sh(ctx, "rm -f "+sshhost.Quote(logFile)); err != nil {
		return nil, fmt.Errorf("host %s: %w", m.name, err)
	}
	argv := append(append([]string{m.lockpick}, DelayQueueArgs(num, delay, jitter)...), "--until-signal")
	pid, err := m.h.Start(ctx, m.dir, logFile, nil, argv)
	if err != nil {
		return nil, fmt.Errorf("host %s: start the queue reader: %w", m.name, err)
	}
	rd := &sshReader{pid: pid, log: logFile}
	wait := fmt.Sprintf(`i=0; until grep -q '^ready ' %s; do kill -0 %d 2>/dev/null && [ $i -lt 400 ] || { tail -n 3 %s; exit 1; }; i=$((i+1)); sleep 0.05; done`,
		sshhost.Quote(logFile), pid, sshhost.Quote(logFile))
	if out, err := m.h.Sh(ctx, wait); err != nil {
		_, _ = m.h.Sh(context.WithoutCancel(ctx), fmt.Sprintf("kill -9 %d 2>/dev/null", pid))
		return nil, fmt.Errorf("host %s: the queue reader did not start: %q: %w", m.name, strings.TrimSpace(string(out)), err)
	}
	return rd, nil
}

// stopReader ends a reader with SIGTERM, waits until it is gone (10 s at most) and reads what it
// did. A reader that ended already (killed) has no counts to give: its packets passed undelayed
// since (--queue-bypass), and that is the error.
func (r *sshRunner) stopReader(ctx context.Context, m *sshMachine, rd *sshReader) (delayStats, error) {
	script := fmt.Sprintf(`kill -TERM %d 2>/dev/null; i=0; while kill -0 %d 2>/dev/null; do i=$((i+1)); [ $i -lt 1000 ] || exit 1; sleep 0.01; done; tail -n 1 %s`,
		rd.pid, rd.pid, sshhost.Quote(rd.log))
	out, err := m.h.Sh(ctx, script)
	if err != nil {
		return delayStats{}, fmt.Errorf("host %s: the queue reader's end: %w", m.name, err)
	}
	st, err := parseDelayStats(string(out))
	if err != nil {
		return delayStats{}, fmt.Errorf("host %s: the queue reader ended before it was stopped (its packets passed undelayed since): %w", m.name, err)
	}
	return st, nil
}

// UnslowPeer implements PeerSlower.
func (r *sshRunner) UnslowPeer(ctx context.Context, from, to string) (PeerSlowStats, error) {
	f, t, err := r.nodePair(from, to)
	if err != nil {
		return PeerSlowStats{}, err
	}
	m := f.host.(*sshNode).m
	return unslowPath(r.log, slowedNode{from, &f.op, &f.peer}, to, func(s *peerSlow) (PeerSlowStats, error) {
		// The counters first, then the rules, then the reader, as on the docker backends.
		out, cerr := m.h.Sh(ctx, "iptables -w -L OUTPUT -n -v -x && iptables -w -L INPUT -n -v -x")
		err := r.hostIptables(ctx, f, "-D", slowRules(t.peer.ip, t.peer.port, s.num))
		qs, rerr := r.stopReader(ctx, m, s.ssh)
		return slowStats(queuePackets(string(out), s.num), cerr, qs), errors.Join(err, rerr)
	})
}

// uploadLockpick copies lockpick's own binary into the run's directory on m, to run the readers
// of slowed paths and the changes of the host's clock there.
func (r *sshRunner) uploadLockpick(ctx context.Context, m *sshMachine, bin string) error {
	f, err := os.Open(bin)
	if err != nil {
		return fmt.Errorf("lockpick's binary, for latency between servers or the hosts' clocks: %w", err)
	}
	defer f.Close()
	m.lockpick = path.Join(m.dir, "lockpick")
	if err := m.h.Upload(ctx, m.lockpick, 0o755, f); err != nil {
		return fmt.Errorf("host %s: upload lockpick's binary: %w", m.name, err)
	}
	// The same architecture and C library as this machine's, or nothing runs: say so now.
	if _, err := m.h.Sh(ctx, sshhost.Quote(m.lockpick)+" internal nfqueue-delay --help >/dev/null 2>&1"); err != nil {
		return fmt.Errorf("host %s: lockpick's binary, uploaded for latency between servers or the hosts' clocks, does not run there (another architecture or C library than this machine's?): %w", m.name, err)
	}
	return nil
}

// unslowAll stops every slowdown still in place (the run's end): no reader outlives the run.
func (r *sshRunner) unslowAll(ctx context.Context) error {
	return unslowEvery(ctx, r.slowedNodes(), r.UnslowPeer)
}
