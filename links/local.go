package links

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A client in this process (the harness's own lock clients) need not reach a node through the
// link's listener: Dial gives it a connection that is the node's socket itself while the link has
// no toxic, and that is handed to the link's toxic chain, as a connection through the listener is,
// when the first toxic comes. A proxy's hop costs each request and reply two more trips through
// loopback TCP and two goroutine wake-ups in this process, which at the ceiling took a third of the
// harness's operations (and kernel forwarding did no better: docs/speed.md). What the client sees
// is what a connection through the listener shows it: the same toxics by the same toxiproxy
// chain, reached through a loopback TCP pair once handed over, and the same ending when the link
// closes its connections (the client reads EOF, as after the proxy's close). Client programs and
// servers, which cannot call Dial, keep the listener.

// localConn is a connection from Dial. Reads and writes go to cur: the node's socket (up) until a
// hand-over, the client end of a loopback pair whose far end the toxic chain serves after it.
type localConn struct {
	link *Link
	up   *net.TCPConn

	rmu, wmu sync.Mutex // one read and one write at a time, as on a socket; a hand-over takes both
	cur      atomic.Pointer[net.TCPConn]
	// moving is set while a hand-over interrupts the reads and writes on up with a past deadline:
	// a deadline error then means "go on with cur once moved is closed".
	moving atomic.Bool
	moved  chan struct{}
	// severed is set when the link closed the connection while it went to the node directly: the
	// client then reads EOF, as from a proxy that closed its side.
	severed atomic.Bool

	// dmu guards the deadlines the client set (applied to cur, and to the new cur by a hand-over)
	// and closed.
	dmu      sync.Mutex
	rdl, wdl time.Time
	closed   bool
}

// Dial opens a connection from the link's group to its node for a client in this process; network
// and address are ignored (the link knows its node): it has the signature of go-redis's Dialer. A
// node that refuses the connection makes Dial fail as a direct dial fails (a dial error: the
// request was never sent), where the listener would accept and then close.
func (l *Link) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", l.upstream())
	if err != nil {
		return nil, err
	}
	c := &localConn{link: l, up: nc.(*net.TCPConn), moved: make(chan struct{})}
	c.cur.Store(c.up)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.trackLocal(c) {
		c.up.Close()
		// What dialling a closed listener gives.
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: l.ln.Addr(), Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	if len(l.toxics) > 0 {
		c.chain(l)
	}
	return c, nil
}

func (c *localConn) Read(b []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		n, err := c.cur.Load().Read(b)
		switch {
		case err == nil:
			return n, nil
		case c.severed.Load():
			return n, io.EOF
		case c.awaitMove(&c.rmu, err):
			continue
		}
		return n, err
	}
}

func (c *localConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	written := 0
	for {
		if c.severed.Load() {
			// A write to a socket whose peer closed it is taken by the kernel; the read says EOF.
			return len(b), nil
		}
		n, err := c.cur.Load().Write(b[written:])
		written += n
		switch {
		case err == nil:
			return written, nil
		case c.severed.Load():
			return len(b), nil
		case c.awaitMove(&c.wmu, err):
			continue
		}
		return written, err
	}
}

// awaitMove reports whether err is a hand-over's interruption of a read or write on up and, if so,
// waits for the hand-over to end with mu (the read's or the write's, which it takes) let go.
func (c *localConn) awaitMove(mu *sync.Mutex, err error) bool {
	if !c.moving.Load() || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	mu.Unlock()
	<-c.moved
	mu.Lock()
	return true
}

// Close closes the connection, and with it the toxic chain's side of it once handed over.
func (c *localConn) Close() error {
	c.dmu.Lock()
	was := c.closed
	c.closed = true
	cur := c.cur.Load()
	c.dmu.Unlock()
	if was {
		return nil
	}
	c.link.untrackLocal(c)
	// Once handed over, cur is the pair's near end: the chain closes up when it reads the end.
	return cur.Close()
}

func (c *localConn) LocalAddr() net.Addr { return c.up.LocalAddr() }

// RemoteAddr is the link's address: where a client of the listener would be connected.
func (c *localConn) RemoteAddr() net.Addr { return c.link.ln.Addr() }

func (c *localConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline applies to cur; while a hand-over is under way it is kept for the new cur.
func (c *localConn) SetReadDeadline(t time.Time) error {
	return c.setDeadline(&c.rdl, t, (*net.TCPConn).SetReadDeadline)
}

func (c *localConn) SetWriteDeadline(t time.Time) error {
	return c.setDeadline(&c.wdl, t, (*net.TCPConn).SetWriteDeadline)
}

func (c *localConn) setDeadline(kept *time.Time, t time.Time, apply func(*net.TCPConn, time.Time) error) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	*kept = t
	if c.moving.Load() {
		return nil
	}
	return apply(c.cur.Load(), t)
}

// chain hands the connection to the link's toxic chain (l.mu is held), without a byte lost,
// repeated or reordered: the reads and writes on up are interrupted and waited for, the chain
// serves up and the far end of a loopback pair from then on, and the client goes on with the near
// end, its deadlines moved there. A pair that cannot be made severs the connection, as a proxy
// that could not forward it would close it.
// A connection is chained once: chainAll and Dial find it among the link's locals, which it leaves
// here, with l.mu held throughout.
func (c *localConn) chain(l *Link) {
	c.dmu.Lock()
	c.moving.Store(true)
	c.up.SetDeadline(time.Unix(1, 0)) // past: the read or write under way returns
	c.dmu.Unlock()
	c.rmu.Lock()
	c.wmu.Lock()
	defer func() {
		c.moving.Store(false)
		close(c.moved)
		c.wmu.Unlock()
		c.rmu.Unlock()
	}()
	l.untrackLocal(c)
	near, far, err := tcpPair()
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if err == nil && c.closed {
		near.Close()
		far.Close()
		err = net.ErrClosed
	}
	if err != nil {
		c.severed.Store(true)
		c.up.Close()
		return
	}
	c.up.SetDeadline(time.Time{})
	near.SetReadDeadline(c.rdl)
	near.SetWriteDeadline(c.wdl)
	c.cur.Store(near)
	pc := &conn{client: far, up: c.up, name: far.RemoteAddr().String(), chained: true}
	if l.track(pc) {
		pc.startChain(l.proxy, l.set.server)
	}
}

// sever closes a connection that goes to the node directly, for the link's closeConns.
func (c *localConn) sever() {
	c.severed.Store(true)
	c.up.Close()
}

// tcpPair returns both ends of a new loopback TCP connection: toxiproxy's chain wants TCP
// connections (its reset toxic sets their linger), and a client reads from a socket as before.
func tcpPair() (near, far *net.TCPConn, err error) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, nil, fmt.Errorf("loopback pair: %w", err)
	}
	defer ln.Close()
	near, err = net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		return nil, nil, fmt.Errorf("loopback pair: %w", err)
	}
	far, err = ln.AcceptTCP()
	if err != nil {
		near.Close()
		return nil, nil, fmt.Errorf("loopback pair: %w", err)
	}
	if far.RemoteAddr().String() != near.LocalAddr().String() {
		near.Close()
		far.Close()
		return nil, nil, fmt.Errorf("loopback pair: another connection reached its listener first")
	}
	return near, far, nil
}

func (l *Link) trackLocal(c *localConn) bool {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	if l.closed {
		return false
	}
	l.locals[c] = struct{}{}
	return true
}

func (l *Link) untrackLocal(c *localConn) {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	delete(l.locals, c)
}
