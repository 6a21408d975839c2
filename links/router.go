package links

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
)

// Router gives each node the one address every other server knows it by (the address Sentinel
// monitors and announces, the address a replica replicates from) and sends each connection to that
// address through the link from the connection's source to the node. Servers tell each other
// addresses, so a proxy per path cannot be handed to them; the source is told instead by the
// connection's source address, which each server process binds to an address of its own (Redis's
// bind-source-addr). A connection from a source the router does not know is refused: a path that
// bypassed its link would make a fault silently miss it.
type Router struct {
	links *Set
	log   *slog.Logger

	mu        sync.Mutex
	sources   map[string]string // source IP -> node name
	listeners []net.Listener
	conns     map[net.Conn]struct{}
	closed    bool
	wg        sync.WaitGroup

	refused atomic.Int64
}

// NewRouter routes over the links of set; log may be nil.
func NewRouter(set *Set, log *slog.Logger) *Router {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Router{links: set, log: log, sources: map[string]string{}, conns: map[net.Conn]struct{}{}}
}

// Source declares that connections from ip come from node.
func (r *Router) Source(node, ip string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sources[ip] = node
}

// Listen opens node's address on addr ("127.0.0.1:0" picks a free port) and returns it. Each
// connection to it goes through the link from its source to node, which must exist when the
// connection arrives.
func (r *Router) Listen(node, addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("router: address of node %s: %w", node, err)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		l.Close()
		return "", errors.New("router: closed")
	}
	r.listeners = append(r.listeners, l)
	r.mu.Unlock()
	r.wg.Go(func() { r.accept(l, node) })
	return l.Addr().String(), nil
}

// Refused counts the connections refused because their source was unknown.
func (r *Router) Refused() int64 { return r.refused.Load() }

func (r *Router) accept(l net.Listener, node string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		r.wg.Go(func() { r.route(c, node) })
	}
}

// route joins c to the link from its source to node, copying both ways until either side ends.
func (r *Router) route(c net.Conn, node string) {
	ip, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	r.mu.Lock()
	src, known := r.sources[ip]
	r.mu.Unlock()
	if !known {
		r.refused.Add(1)
		r.log.Warn("router: connection from an unknown source refused", "to", node, "from", c.RemoteAddr().String())
		c.Close()
		return
	}
	l, err := r.links.Get(src, node)
	if err != nil {
		r.refused.Add(1)
		r.log.Warn("router: no link for a connection", "from", src, "to", node, "err", err)
		c.Close()
		return
	}
	up, err := net.Dial("tcp", l.Addr)
	if err != nil {
		c.Close()
		return
	}
	if !r.track(c, up) {
		return
	}
	defer r.untrack(c, up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	// One side ended: the path is gone for both, as a TCP connection through a real network would be.
	c.Close()
	up.Close()
	<-done
}

func (r *Router) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *Router) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.conns, c)
	}
}

// Close stops listening and closes every routed connection.
func (r *Router) Close() error {
	r.mu.Lock()
	r.closed = true
	for _, l := range r.listeners {
		l.Close()
	}
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}
