// Package links puts an in-process toxiproxy proxy on every path a fault may cut (from a client
// group to a node, and between servers: a replica to its master, a sentinel to a node), so that a
// nemesis can cut, slow or reset any path without touching lock or server code.
package links

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Link is one proxied path from a client group, or from a server node, to a node.
type Link struct {
	// Group is the client group the path starts from, or the node for a path between servers.
	Group string
	Node  string
	// Addr is where clients of the group connect to reach the node.
	Addr string
	// Upstream is the node's address; Retarget moves it (read it through CurrentUpstream while
	// the link runs).
	Upstream string

	set *Set

	ln net.Listener

	// mu guards proxy, which Renew replaces, toxics, and the connections' chained flags; it is held
	// while a toxic is added, so that no connection starts by plain copy beside a toxic.
	mu     sync.Mutex
	proxy  *toxiproxy.Proxy // never started: its ToxicCollection is the link's toxic chain
	toxics map[string]Toxic // what AddToxic placed and no removal took off yet

	connMu sync.Mutex
	conns  map[*conn]struct{}
	// locals are the connections from Dial that still go to the node directly.
	locals map[*localConn]struct{}
	closed bool
}

func (l *Link) px() *toxiproxy.Proxy {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.proxy
}

// Name identifies the link, as "group->node".
func (l *Link) Name() string { return l.Group + "->" + l.Node }

// Set is every link of a run.
type Set struct {
	server *toxiproxy.ApiServer

	mu    sync.Mutex
	links map[string]*Link
}

// New returns an empty set of links.
func New() *Set {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	return &Set{server: srv, links: map[string]*Link{}}
}

// Add starts a link from group to the node at upstream, listening on a free loopback port.
func (s *Set) Add(group, node, upstream string) (*Link, error) {
	l := &Link{Group: group, Node: node, Upstream: upstream, set: s, toxics: map[string]Toxic{}, conns: map[*conn]struct{}{}, locals: map[*localConn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start link %s: %w", l.Name(), err)
	}
	l.ln = ln
	l.Addr = ln.Addr().String()
	l.proxy = toxiproxy.NewProxy(s.server, l.Name(), l.Addr, upstream)
	go l.serve(ln)
	s.mu.Lock()
	s.links[l.Name()] = l
	s.mu.Unlock()
	return l, nil
}

// Get returns the link from group to node.
func (s *Set) Get(group, node string) (*Link, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.links[group+"->"+node]
	if !ok {
		return nil, fmt.Errorf("no link from group %q to node %q", group, node)
	}
	return l, nil
}

// All lists the links sorted by name.
func (s *Set) All() []*Link {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Link, 0, len(s.links))
	for _, l := range s.links {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Toxic is a toxiproxy toxic: a fault on one direction of a link.
type Toxic struct {
	Name string `json:"name"`
	// Type is a toxiproxy toxic type: timeout, reset_peer, latency, bandwidth, slicer, limit_data.
	Type string `json:"type"`
	// Stream is upstream (client to node) or downstream (node to client).
	Stream     string         `json:"stream"`
	Toxicity   float32        `json:"toxicity"`
	Attributes map[string]any `json:"attributes"`
}

// AddToxic applies a toxic to the link, first moving the connections it forwards by plain copy into
// the toxic chain (still empty: nothing changes for them but the path their bytes take).
func (l *Link) AddToxic(t Toxic) error {
	if t.Toxicity == 0 {
		t.Toxicity = 1
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.chainAll()
	if err := addToxic(l.proxy, t); err != nil {
		return fmt.Errorf("add toxic %s to link %s: %w", t.Name, l.Name(), err)
	}
	l.toxics[t.Name] = t
	return nil
}

func addToxic(px *toxiproxy.Proxy, t Toxic) error {
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	_, err = px.Toxics.AddToxicJson(bytes.NewReader(b))
	return err
}

// RemoveBound is how long a toxic's removal may take before the link is renewed instead. Removing
// a toxic that held data makes toxiproxy flush it, one chunk at a time, into the connections; when
// the far end died meanwhile each chunk waits 5 s for a writer that is gone, under the proxy's
// lock (Shopify/toxiproxy#558): 50 held chunks took 4 minutes here. A heal must not wait that long.
const RemoveBound = 2 * time.Second

// RemoveToxic removes a toxic by name. A removal that does not finish within RemoveBound renews the
// link (its connections close, as a dead peer's would) and puts back the link's other toxics.
func (l *Link) RemoveToxic(ctx context.Context, name string) error {
	px := l.px()
	done := make(chan error, 1)
	go func() { done <- px.Toxics.RemoveToxic(ctx, name) }()
	bound := time.NewTimer(RemoveBound)
	defer bound.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("remove toxic %s from link %s: %w", name, l.Name(), err)
		}
		l.forget(name)
		return nil
	case <-bound.C:
	}
	// The stuck flush is left to end when the old proxy's connections close.
	l.forget(name)
	if err := l.set.renewKeeping(l); err != nil {
		return fmt.Errorf("remove toxic %s from link %s: the removal hung, and %w", name, l.Name(), err)
	}
	return nil
}

func (l *Link) forget(name string) {
	l.mu.Lock()
	delete(l.toxics, name)
	l.mu.Unlock()
}

// Renew closes every connection through the link and drops its toxics at once, keeping its address:
// what a healed network shows after the node behind a cut link died (the node's resets arrive, and
// whatever was held back on the way is lost with it). Removing the toxics instead would make
// toxiproxy flush the held data into the dead connection one chunk at a time, each chunk waiting
// 5 s, for as long as the live end keeps sending: a minute and more for a replica's stalled link.
// The stuck chunks' goroutines are left behind.
func (s *Set) Renew(l *Link) error {
	if err := s.renew(l); err != nil {
		return err
	}
	l.mu.Lock()
	clear(l.toxics)
	l.mu.Unlock()
	return nil
}

// renewKeeping renews the link and puts its toxics back on the new proxy: what a bounded removal
// does, so that the other faults on the link stay in effect.
func (s *Set) renewKeeping(l *Link) error {
	if err := s.renew(l); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.toxics {
		if err := addToxic(l.proxy, t); err != nil {
			return fmt.Errorf("put toxic %s back on link %s: %w", t.Name, l.Name(), err)
		}
	}
	return nil
}

// renew closes the link's connections and starts an empty toxic chain; its listener stays.
func (s *Set) renew(l *Link) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closeConns()
	l.proxy = toxiproxy.NewProxy(s.server, l.Name(), l.Addr, l.Upstream)
	return nil
}

// Retarget points the link at another upstream, keeping its address and its toxics: what a
// virtual IP or a DNS name moved to another server does for the clients behind it. Every
// connection through the link closes, as a connection to the old server does when its address
// moves (its packets now reach a host that knows no such connection and resets it).
func (s *Set) Retarget(l *Link, upstream string) error {
	l.mu.Lock()
	l.Upstream = upstream
	l.mu.Unlock()
	if err := s.renewKeeping(l); err != nil {
		return fmt.Errorf("retarget link %s to %s: %w", l.Name(), upstream, err)
	}
	return nil
}

// CurrentUpstream is the address the link forwards to now.
func (l *Link) CurrentUpstream() string { return l.upstream() }

func (l *Link) upstream() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Upstream
}

// Close stops every link and closes the connections through them.
func (s *Set) Close() error {
	var errs []error
	for _, l := range s.All() {
		l.mu.Lock()
		l.connMu.Lock()
		was := l.closed
		l.closed = true
		l.connMu.Unlock()
		if !was {
			if err := l.ln.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close link %s: %w", l.Name(), err))
			}
		}
		l.closeConns()
		l.mu.Unlock()
	}
	return errors.Join(errs...)
}
