package links

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"
)

// Forwarder is an HTTP forward proxy for one server's outgoing HTTP traffic to its peers, for servers
// whose peers talk HTTP and that honour HTTP_PROXY (etcd's members do, for all their peer traffic:
// raft streams and pipelines, snapshots, version checks, forwarded lease renewals). A server started
// with HTTP_PROXY pointing at its own Forwarder sends every peer request there; the Forwarder knows
// who is calling by which Forwarder was called, finds the callee by the request's host, and sends the
// request on through the link from the caller to the callee. So each direction of each pair of servers
// has its own link, which a fault can cut, slow or reset, without a source address per server.
//
// Go's HTTP client never sends loopback addresses through a proxy, so the servers must know each other
// by addresses that are not loopback ones; the forwarder maps each to a peer.
type Forwarder struct {
	set  *Set
	from string
	// self is the server's own peer address: a request to itself goes there directly.
	self string
	// peers maps the host:port a peer is known by to the peer's name.
	peers map[string]string
	log   *slog.Logger

	srv   *http.Server
	ln    net.Listener
	proxy *httputil.ReverseProxy
	tr    *http.Transport
	once  sync.Once
}

// NewForwarder starts a forward proxy for the server from, whose own peer address is self, on a free
// loopback port. peers maps the host:port each server is known by to its name; a request to any other
// host is refused.
func NewForwarder(set *Set, from, self string, peers map[string]string, log *slog.Logger) (*Forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("forwarder for %s: %w", from, err)
	}
	f := &Forwarder{set: set, from: from, self: self, peers: peers, log: log, ln: ln}
	// Connections upstream are the links': a fault on a link cuts exactly what goes through it.
	f.tr = &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	f.proxy = &httputil.ReverseProxy{
		Rewrite:       f.rewrite,
		Transport:     f.tr,
		FlushInterval: -1, // raft streams are long-lived responses: pass every write on at once
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if !errors.Is(err, context.Canceled) {
				log.Debug("forwarder: upstream failed", "from", from, "host", r.Host, "path", r.URL.Path, "err", err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go f.srv.Serve(ln)
	return f, nil
}

// Addr is the proxy's address, for the server's HTTP_PROXY.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

// ServeHTTP refuses what is not a request for a known peer, and forwards the rest.
func (f *Forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, ok := f.peers[r.URL.Host]; !ok || r.Method == http.MethodConnect {
		http.Error(w, fmt.Sprintf("lockpick forwarder for %s: no peer known as %q", f.from, r.URL.Host), http.StatusBadGateway)
		return
	}
	f.proxy.ServeHTTP(w, r)
}

// rewrite sends the request to the link from the caller to the peer its host names.
func (f *Forwarder) rewrite(pr *httputil.ProxyRequest) {
	to := f.peers[pr.In.URL.Host]
	pr.Out.URL.Scheme = "http"
	pr.Out.Host = pr.In.Host
	if to == f.from {
		pr.Out.URL.Host = f.self // a server asking itself (a joining etcd member does) crosses no link
		return
	}
	l, err := f.set.Get(f.from, to)
	if err != nil {
		// ServeHTTP checked the peer; a missing link is a bug in the system that set it up.
		f.log.Error("forwarder: no link", "from", f.from, "to", to, "err", err)
		return
	}
	pr.Out.URL.Host = l.Addr
}

// Close stops the proxy and closes every connection through it.
func (f *Forwarder) Close() error {
	f.once.Do(func() {
		f.srv.Close()
		f.tr.CloseIdleConnections()
	})
	return nil
}
