package systems

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The NFQUEUE protocol (linux/netfilter/nfnetlink_queue.h), the little of it a delay needs: bind a
// queue, ask for each packet's metadata only, and answer each with ACCEPT. github.com/florianl/
// go-nfqueue speaks it too, but the module proxy here refuses it; it is itself a thin layer on
// github.com/mdlayher/netlink, which this uses directly.
const (
	nfnlSubsysQueue = 3
	nfqnlMsgPacket  = 0
	nfqnlMsgVerdict = 1
	nfqnlMsgConfig  = 2

	nfqaPacketHdr  = 1
	nfqaVerdictHdr = 2

	nfqaCfgCmd         = 1
	nfqaCfgParams      = 2
	nfqaCfgQueueMaxlen = 3
	nfqaCfgMask        = 4
	nfqaCfgFlags       = 5

	nfqnlCfgCmdBind = 1
	nfqnlCopyMeta   = 1

	// Fail open: a packet the full queue (or a full socket) cannot take passes at once instead of
	// being dropped; GSO: the kernel queues a large segment as one, not cut into many.
	nfqaCfgFFailOpen = 1
	nfqaCfgFGSO      = 4

	nfAccept = 1
)

// nfqMaxLen is how many packets one queue holds, in the kernel and in the reader: generous, as a
// path of a few hundred milliseconds at full speed holds thousands. Past it packets fail open.
const nfqMaxLen = 16384

// delayStats counts what a delay queue did.
type delayStats struct {
	// Delayed are the packets held and released; Overflows the times the kernel could not hand
	// the reader a packet (its socket was full), which then passed undelayed (fail open); Failed
	// the verdicts the kernel refused (their packets are dropped when the queue closes, and TCP
	// sends them again).
	Delayed, Overflows, Failed uint64
}

// delayQueue holds each packet of one NFQUEUE queue for a delay and then accepts it, in the order
// they came: a packet leaves no earlier than the one before it, so jitter never reorders a path.
type delayQueue struct {
	conn          *netlink.Conn
	num           uint16
	delay, jitter time.Duration

	held chan heldPacket
	stop chan struct{}
	done chan struct{}

	delayed, overflows, failed atomic.Uint64
}

type heldPacket struct {
	id  uint32
	due time.Time
}

// startDelayQueue binds queue num in the network namespace netns (a file of /proc/PID/ns/net) and
// delays its packets by delay, plus or minus up to jitter, drawn uniformly per packet (as
// toxiproxy's latency toxic does per chunk). The socket is created in the namespace (by
// mdlayher/socket: a locked thread enters it, creates the socket, and goes back, or dies with the
// thread if it cannot) and stays there; the reader's goroutines then run anywhere.
func startDelayQueue(netns *os.File, num uint16, delay, jitter time.Duration) (*delayQueue, error) {
	q, err := openDelayQueue(&netlink.Config{NetNS: int(netns.Fd())}, num, delay, jitter)
	if err != nil {
		return nil, fmt.Errorf("nfqueue %d in %s: %w", num, netns.Name(), err)
	}
	return q, nil
}

// openDelayQueue is startDelayQueue in the namespace cfg names (none: the caller's own, as for the
// reader a remote node's holder runs).
func openDelayQueue(cfg *netlink.Config, num uint16, delay, jitter time.Duration) (*delayQueue, error) {
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("nfqueue %d: open netlink: %w", num, err)
	}
	q := &delayQueue{conn: conn, num: num, delay: delay, jitter: jitter,
		held: make(chan heldPacket, nfqMaxLen), stop: make(chan struct{}), done: make(chan struct{})}
	if err := q.configure(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("nfqueue %d: %w", num, err)
	}
	go q.receive()
	go q.release()
	return q, nil
}

// RunDelayQueue is the reader of a remote node's slowed path, run by `lockpick internal
// nfqueue-delay` in the node's holder (whose namespace it is already in): it binds queue num,
// writes "ready PID" once bound, delays the queue's packets until ctx ends (SIGTERM) or in ends
// (the lockpick that started it is gone: as on the local Engine, a dead lockpick leaves no path
// slowed; a nil in, on an ssh host where the reader runs detached, is never watched), releases
// what it holds, and writes its counts as its last line (see parseDelayStats).
func RunDelayQueue(ctx context.Context, in io.Reader, w io.Writer, num uint16, delay, jitter time.Duration) error {
	q, err := openDelayQueue(&netlink.Config{}, num, delay, jitter)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "ready %d\n", os.Getpid())
	gone := make(chan struct{}) // never closed without an input to watch (nil)
	if in != nil {
		go func() {
			_, _ = io.Copy(io.Discard, in)
			close(gone)
		}()
	}
	select {
	case <-ctx.Done():
	case <-gone:
	}
	st := q.close()
	_, err = fmt.Fprintf(w, "%s %d %d %d\n", delayStatsWord, st.Delayed, st.Overflows, st.Failed)
	return err
}

// delayStatsWord starts the last line of a remote reader: its delayed, overflow and failed counts.
const delayStatsWord = "nfqueue-stats"

// parseDelayStats reads a remote reader's last line.
func parseDelayStats(line string) (delayStats, error) {
	var st delayStats
	var word string
	if _, err := fmt.Sscan(line, &word, &st.Delayed, &st.Overflows, &st.Failed); err != nil || word != delayStatsWord {
		return delayStats{}, fmt.Errorf("the reader's last line %q holds no counts", strings.TrimSpace(line))
	}
	return st, nil
}

// configure binds the queue and sets it up, each step acknowledged by the kernel.
func (q *delayQueue) configure() error {
	// A big socket buffer keeps overflows (fail open) rare; it is capped by net.core.rmem_max.
	if err := q.conn.SetReadBuffer(4 << 20); err != nil {
		return fmt.Errorf("socket buffer: %w", err)
	}
	steps := []struct {
		what string
		attr uint16
		val  []byte
	}{
		{"bind", nfqaCfgCmd, []byte{nfqnlCfgCmdBind, 0, 0, unix.AF_INET}},
		// Metadata only: the packet's id is all a verdict needs.
		{"copy mode", nfqaCfgParams, []byte{0, 0, 0, 0, nfqnlCopyMeta}},
		{"max length", nfqaCfgQueueMaxlen, be32(nfqMaxLen)},
	}
	for _, s := range steps {
		ae := netlink.NewAttributeEncoder()
		ae.Bytes(s.attr, s.val)
		if err := q.execute(s.what, ae); err != nil {
			return err
		}
	}
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(nfqaCfgFlags, be32(nfqaCfgFFailOpen|nfqaCfgFGSO))
	ae.Bytes(nfqaCfgMask, be32(nfqaCfgFFailOpen|nfqaCfgFGSO))
	return q.execute("flags", ae)
}

func (q *delayQueue) execute(what string, ae *netlink.AttributeEncoder) error {
	attrs, err := ae.Encode()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, err := q.conn.Execute(q.message(nfqnlMsgConfig, netlink.Request|netlink.Acknowledge, attrs)); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// message is an nfnetlink message of the queue subsystem about queue q.num.
func (q *delayQueue) message(typ uint16, flags netlink.HeaderFlags, attrs []byte) netlink.Message {
	data := make([]byte, 4, 4+len(attrs))
	data[0] = unix.AF_UNSPEC
	binary.BigEndian.PutUint16(data[2:], q.num)
	return netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(nfnlSubsysQueue<<8 | typ), Flags: flags},
		Data: append(data, attrs...)}
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// receive takes the queue's packets as they come and schedules each, until the socket closes or
// stop's read deadline passes; then it closes held, so release lets out what is left.
func (q *delayQueue) receive() {
	defer close(q.held)
	var last time.Time
	for {
		msgs, err := q.conn.Receive()
		if errors.Is(err, unix.ENOBUFS) {
			q.overflows.Add(1)
			continue
		}
		if err != nil {
			return
		}
		for _, m := range msgs {
			id, ok := packetID(m)
			if !ok {
				continue
			}
			last = nextDue(last, time.Now(), q.draw())
			q.held <- heldPacket{id, last}
		}
	}
}

// nextDue is when a packet that came at now and is to be held for d leaves, given that the packet
// ahead of it leaves at last: never before it, so the queue stays in order.
func nextDue(last, now time.Time, d time.Duration) time.Time {
	if due := now.Add(d); due.After(last) {
		return due
	}
	return last
}

// draw is one packet's delay: delay plus a uniform draw in [-jitter, jitter), never below zero.
func (q *delayQueue) draw() time.Duration {
	d := q.delay
	if q.jitter > 0 {
		d += time.Duration(rand.Int64N(int64(2*q.jitter))) - q.jitter
	}
	return max(d, 0)
}

// packetID is the id of a queued packet's message.
func packetID(m netlink.Message) (uint32, bool) {
	if m.Header.Type&0xff != nfqnlMsgPacket || len(m.Data) < 4 {
		return 0, false
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return 0, false
	}
	for ad.Next() {
		if b := ad.Bytes(); ad.Type() == nfqaPacketHdr && len(b) >= 4 {
			return binary.BigEndian.Uint32(b), true
		}
	}
	return 0, false
}

// release accepts each held packet once it is due; after stop, at once.
func (q *delayQueue) release() {
	defer close(q.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for p := range q.held {
		if wait := time.Until(p.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-q.stop:
			}
		}
		if err := q.accept(p.id); err != nil {
			q.failed.Add(1)
			continue
		}
		q.delayed.Add(1)
	}
}

func (q *delayQueue) accept(id uint32) error {
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(nfqaVerdictHdr, append(be32(nfAccept), be32(id)...))
	attrs, err := ae.Encode()
	if err != nil {
		return err
	}
	_, err = q.conn.Send(q.message(nfqnlMsgVerdict, netlink.Request, attrs))
	return err
}

// close releases what the queue holds at once, and closes the socket, which unbinds the queue:
// call it once its rules are gone, so nothing new comes. What came meanwhile and sits in the
// socket is read until a short deadline and released too.
func (q *delayQueue) close() delayStats {
	close(q.stop)
	if err := q.conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		q.conn.Close() // cannot wait for the socket to empty: end the reader now
	}
	<-q.done
	q.conn.Close()
	return delayStats{Delayed: q.delayed.Load(), Overflows: q.overflows.Load(), Failed: q.failed.Load()}
}
