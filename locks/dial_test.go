package locks

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// dialsOnItsOwn says whether a lock's library opens its connections itself from an address
// (rueidis, go-zero's own redis client): such a lock reaches a node through its link's listener,
// never through Endpoint.Dial.
func dialsOnItsOwn(k Kind) bool {
	return k.Library == modGoZero || k.Library == "github.com/redis/rueidis/rueidislock"
}

// Every Go lock on Redis masters that lockpick gives a go-redis client of its own connects through
// the endpoint's Dial when it has one (a link in process): with Addr refused, only Dial reaches the
// node, and the lock is granted. A lock that dialled Addr would take the listener's hop and its cost
// again (docs/speed.md); one whose library dials on its own must still reach Addr.
func TestLocksDialThroughTheEndpoint(t *testing.T) {
	_, eps, _ := cluster(t, 5)
	refused := closedAddr(t)
	for _, name := range namesOn("redis-masters") {
		k, _ := Lookup(name)
		if k.Program {
			continue
		}
		t.Run(name, func(t *testing.T) {
			var dials atomic.Int64
			routed := make([]Endpoint, len(eps))
			for i, e := range eps {
				real := e.Addr
				routed[i] = Endpoint{Node: e.Node, Addr: refused, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
					dials.Add(1)
					var d net.Dialer
					return d.DialContext(ctx, network, real)
				}}
				if dialsOnItsOwn(k) {
					routed[i].Addr = real
				}
			}
			l := openWith(t, name, routed[:max(k.Nodes, 1)], Options{NodeTimeout: time.Second})
			lease, err := l.Acquire(context.Background(), "dial-"+name, 2*time.Second)
			if err != nil {
				t.Fatalf("acquire: %v", err)
			}
			l.Release(context.Background(), lease)
			if used := dials.Load() > 0; used == dialsOnItsOwn(k) {
				t.Fatalf("%d dials through Endpoint.Dial; the lock dials on its own: %v", dials.Load(), dialsOnItsOwn(k))
			}
		})
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
