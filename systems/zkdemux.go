package systems

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// zkDemux (also a relay, with both targets one address) is a member's one peer address: a link carries one TCP path per pair of members, but a
// ZooKeeper member listens on two peer ports (quorum and leader election). Both connections start
// with the caller's bytes, and they differ in the first: an election connection opens with the
// protocol version, a negative long (0xff...), a learner's first quorum packet with its type, a
// small positive int (0x00...). So the demux peeks one byte and sends the connection on.
type zkDemux struct {
	ln               net.Listener
	quorum, election string
	mu               sync.Mutex
	conns            map[net.Conn]struct{}
	closed           bool
	wg               sync.WaitGroup
}

// newZKDemux listens on a free loopback port for the member whose ports are quorum and election.
func newZKDemux(quorum, election string) (*zkDemux, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("zookeeper peer demux: %w", err)
	}
	d := &zkDemux{ln: ln, quorum: quorum, election: election, conns: map[net.Conn]struct{}{}}
	d.wg.Go(d.accept)
	return d, nil
}

// Addr is the member's peer address, the upstream of every link to it from another member.
func (d *zkDemux) Addr() string { return d.ln.Addr().String() }

func (d *zkDemux) accept() {
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		if !d.track(c) {
			c.Close()
			return
		}
		d.wg.Go(func() { d.route(c) })
	}
}

func (d *zkDemux) route(c net.Conn) {
	defer d.untrack(c)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	first, err := r.Peek(1)
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	target := d.quorum
	if first[0] == 0xff {
		target = d.election
	}
	up, err := dialPatiently(target, 2*time.Second)
	if err != nil {
		return
	}
	if !d.track(up) {
		up.Close()
		return
	}
	defer d.untrack(up)
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, r); closeWrite(up); done <- struct{}{} }()
	go func() { io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
	<-done // either side's end ends the connection: ZooKeeper does not half-close
	c.Close()
	up.Close()
	<-done
}

// dialPatiently dials target until it answers or wait passes. The caller's connection was accepted
// already (by its link), so a refusal would reach it as an end of stream after a connect that
// worked: a follower that meets a new leader whose quorum port is not open yet gives up at once
// (where a refused connect it would retry) and falls back to an election that takes seconds.
func dialPatiently(target string, wait time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(wait)
	for {
		c, err := net.DialTimeout("tcp", target, time.Second)
		if err == nil || time.Now().After(deadline) {
			return c, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// closeWrite passes an end of stream on, so each side sees the other's close.
func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}

func (d *zkDemux) track(c net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.conns[c] = struct{}{}
	return true
}

func (d *zkDemux) untrack(c net.Conn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.conns, c)
}

// Close stops listening and ends every connection it carries.
func (d *zkDemux) Close() error {
	d.mu.Lock()
	d.closed = true
	err := d.ln.Close()
	for c := range d.conns {
		c.Close()
	}
	d.mu.Unlock()
	d.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
