package containers

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
)

// Forwarder exposes a local Engine's unix socket on a TCP address: the same Engine, reached as a
// remote one (tcp://), so the remote code path can be tested without a second machine. Nothing is
// restarted; it serves until Close.
type Forwarder struct {
	ln     net.Listener
	socket string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

// Forward listens on listen (host:port, port 0 for any) and relays every connection to socket.
func Forward(socket, listen string) (*Forwarder, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("forward %s: %w", socket, err)
	}
	f := &Forwarder{ln: ln, socket: socket, conns: map[net.Conn]bool{}}
	f.wg.Go(f.serve)
	return f, nil
}

// Host is the Engine address to connect to: tcp://HOST:PORT.
func (f *Forwarder) Host() string { return "tcp://" + f.ln.Addr().String() }

func (f *Forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Go(func() { f.relay(c) })
	}
}

// relay copies both ways until either side closes (hijacked exec and attach streams included).
func (f *Forwarder) relay(c net.Conn) {
	var d net.Dialer
	u, err := d.DialContext(context.Background(), "unix", f.socket)
	if err != nil {
		c.Close()
		return
	}
	f.mu.Lock()
	f.conns[c], f.conns[u] = true, true
	f.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		// Half-close where possible, so a client's end of input reaches the Engine.
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(u, c)
	go pipe(c, u)
	<-done
	<-done
	c.Close()
	u.Close()
	f.mu.Lock()
	delete(f.conns, c)
	delete(f.conns, u)
	f.mu.Unlock()
}

// Close stops listening and ends every relayed connection.
func (f *Forwarder) Close() error {
	err := f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	return err
}
