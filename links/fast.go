package links

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/stream"
)

// A link forwards each connection with a plain copy, one goroutine a direction, while no toxic is
// set on it, and hands its connections to toxiproxy's toxic chain when the first toxic comes.
// toxiproxy has no such path: its Proxy passes every chunk from a reader goroutine through a channel
// to a noop toxic's goroutine and through another channel to a writer goroutine, toxic or not (three
// goroutine hand-offs a chunk), and its accept loop starts that chain itself. So the link accepts
// and dials on its own and keeps a toxiproxy Proxy that is never started, only for its
// ToxicCollection, whose StartLink takes a live connection into the chain as the Proxy's accept loop
// would. A connection handed over stays in the chain until it closes: leaving the chain would need
// toxiproxy's writer to let go of the connection without closing it, which it does not do.

// conn is one connection through a link: the client's and the one to the node.
type conn struct {
	client, up *net.TCPConn
	// name is the client's address, which toxiproxy names a connection's two chains after.
	name string
	// pipes are the two directions, upstream (client to node) and downstream.
	pipes [2]*pipe
	// chained is set once the connection went to the toxic chain; guarded by the link's mu.
	chained bool
}

// pipe copies one direction of a connection until its source ends or a hand-over stops it.
type pipe struct {
	src, dst *net.TCPConn
	handover atomic.Bool
	ended    bool // the source ended (or the destination failed) and dst is closed; read after done
	done     chan struct{}
}

func newConn(client, up *net.TCPConn) *conn {
	c := &conn{client: client, up: up, name: client.RemoteAddr().String()}
	c.pipes[stream.Upstream] = &pipe{src: client, dst: up, done: make(chan struct{})}
	c.pipes[stream.Downstream] = &pipe{src: up, dst: client, done: make(chan struct{})}
	return c
}

// run copies until the source ends, and then closes the destination, as toxiproxy's chain does when
// its input ends: one side's end closes the other direction's source too, so both go. A hand-over
// interrupts the wait for the next bytes with a past deadline; whatever was read before is written
// first, so the chain carries on from the next byte.
func (p *pipe) run() {
	defer close(p.done)
	raw, err := p.src.SyscallConn()
	if err != nil {
		p.end()
		return
	}
	buf := make([]byte, 32<<10)
	ended := false
	err = raw.Read(func(fd uintptr) bool {
		ended = p.copyReady(int(fd), buf)
		return ended // not ended: wait for the socket to be readable again
	})
	if err != nil && !ended && p.handover.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
		return
	}
	p.end()
}

// copyReady reads src's socket (fd) until it has nothing more now and writes each read to dst. It
// reports whether the source ended or dst failed. A read
// shorter than buf empties a stream socket (epoll(7)), so the wait for the next bytes follows it
// directly: Go's poller is edge-triggered and any bytes arriving after the read wake the wait.
// Without it each request and reply through a link cost a third system call, a read that finds
// nothing, in each direction.
func (p *pipe) copyReady(fd int, buf []byte) (ended bool) {
	for {
		n, err := syscall.Read(fd, buf)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false
		case err != nil || n == 0: // reset, or the end of the stream
			return true
		}
		if _, werr := p.dst.Write(buf[:n]); werr != nil {
			return true
		}
		if n < len(buf) {
			return false
		}
	}
}

// end marks the source ended and closes the destination.
func (p *pipe) end() {
	p.ended = true
	p.dst.Close()
}

// serve forwards both directions with plain copies, and forgets the connection when it ended there.
func (c *conn) serve(l *Link) {
	go c.pipes[stream.Downstream].run()
	c.pipes[stream.Upstream].run()
	<-c.pipes[stream.Downstream].done
	if !c.pipes[stream.Upstream].handover.Load() {
		c.client.Close()
		c.up.Close()
		l.untrack(c)
	}
}

// chain stops both plain copies and starts the connection in px's toxic chain, without a byte lost,
// repeated or reordered: each copy writes what it read before it stops, and the chain reads on from
// there. A connection one of whose sides ended meanwhile is closed instead, as the chain would.
func (c *conn) chain(px *toxiproxy.Proxy, srv *toxiproxy.ApiServer) {
	for _, p := range c.pipes {
		p.handover.Store(true)
		p.src.SetReadDeadline(time.Unix(1, 0))
	}
	for _, p := range c.pipes {
		<-p.done
	}
	c.chained = true
	if c.pipes[stream.Upstream].ended || c.pipes[stream.Downstream].ended {
		c.client.Close()
		c.up.Close()
		return
	}
	for _, p := range c.pipes {
		p.src.SetReadDeadline(time.Time{})
	}
	c.startChain(px, srv)
}

// startChain gives the connection to px's toxic chain, as toxiproxy's own accept loop does.
func (c *conn) startChain(px *toxiproxy.Proxy, srv *toxiproxy.ApiServer) {
	c.chained = true
	px.Toxics.StartLink(srv, c.name+"upstream", c.client, c.up, stream.Upstream)
	px.Toxics.StartLink(srv, c.name+"downstream", c.up, c.client, stream.Downstream)
}

// serve accepts the link's connections until its listener closes.
func (l *Link) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", l.upstream())
		if err != nil {
			c.Close() // the node refused: so does the link, as a path to a dead node does
			continue
		}
		l.start(newConn(c.(*net.TCPConn), up.(*net.TCPConn)))
	}
}

// start forwards a new connection: in the toxic chain while the link has toxics, by plain copy
// otherwise.
func (l *Link) start(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.track(c) {
		return
	}
	if len(l.toxics) > 0 {
		c.startChain(l.proxy, l.set.server)
		return
	}
	go c.serve(l)
}

// chainAll moves the link's plain-copy connections into the toxic chain; l.mu is held.
func (l *Link) chainAll() {
	l.connMu.Lock()
	var fast []*conn
	for c := range l.conns {
		if !c.chained {
			fast = append(fast, c)
		}
	}
	locals := make([]*localConn, 0, len(l.locals))
	for c := range l.locals {
		locals = append(locals, c)
	}
	l.connMu.Unlock()
	for _, c := range fast {
		c.chain(l.proxy, l.set.server)
	}
	for _, c := range locals {
		c.chain(l)
	}
}

func (l *Link) track(c *conn) bool {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	if l.closed {
		c.client.Close()
		c.up.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Link) untrack(c *conn) {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	delete(l.conns, c)
}

// closeConns closes every connection through the link, in the chain or not, and severs those from
// Dial that go to the node directly. A chained connection is forgotten here: toxiproxy's chain does
// not say when it ends, so it is kept until the link closes its connections.
func (l *Link) closeConns() {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	for c := range l.locals {
		c.sever()
		delete(l.locals, c)
	}
	for c := range l.conns {
		c.client.Close()
		c.up.Close()
		if c.chained {
			delete(l.conns, c)
		}
	}
}
