package locks

import (
	"context"
	"errors"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// errGRPCPaused is never returned to a caller; it marks the gate's own refusals in classification.
var errGRPCPaused = errors.New("client paused")

// grpcGate stops an in-process etcd client as SIGSTOP stops a process: while paused, no request or
// stream message leaves and no answer is handed back, the library's background keepalives included.
// The rueidis client of rueidislock passes its commands through one too.
type grpcGate struct {
	mu     sync.Mutex
	paused chan struct{} // closed on resume; nil while running
}

func newGRPCGate() *grpcGate { return &grpcGate{} }

func (g *grpcGate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused == nil {
		g.paused = make(chan struct{})
	}
}

func (g *grpcGate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused != nil {
		close(g.paused)
		g.paused = nil
	}
}

// wait returns once the gate is open; a paused client waits whatever its context says, as a stopped
// process's timers do not fire.
func (g *grpcGate) wait() {
	g.mu.Lock()
	ch := g.paused
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// keepaliveTrack follows the lease grants and keepalives an etcd client sends and the answers it
// gets, and keeps per lease the deadline the client can know: the send time of the request the
// latest answer answered, plus the TTL that answer gave. Answers on a keepalive stream come in the
// order of the requests, which pairs each with its send time.
type keepaliveTrack struct {
	gate *grpcGate
	// on is called with every answer: the lease, its new deadline, and whether the lease is gone.
	on func(lease int64, deadline time.Time, lost bool)

	mu        sync.Mutex
	deadlines map[int64]time.Time
}

func newKeepaliveTrack(gate *grpcGate, on func(int64, time.Time, bool)) *keepaliveTrack {
	return &keepaliveTrack{gate: gate, on: on, deadlines: map[int64]time.Time{}}
}

func (k *keepaliveTrack) deadline(lease int64) (time.Time, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	d, ok := k.deadlines[lease]
	return d, ok
}

func (k *keepaliveTrack) answer(lease, ttl int64, sent time.Time) {
	lost := ttl <= 0
	d := sent.Add(time.Duration(ttl) * time.Second)
	k.mu.Lock()
	if lost {
		d = sent
		delete(k.deadlines, lease)
	} else if d.After(k.deadlines[lease]) {
		k.deadlines[lease] = d
	}
	k.mu.Unlock()
	if k.on != nil {
		k.on(lease, d, lost)
	}
}

// unary passes a request through the gate, and times lease grants.
func (k *keepaliveTrack) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	k.gate.wait()
	sent := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	k.gate.wait()
	if g, ok := reply.(*pb.LeaseGrantResponse); ok && err == nil && g.Error == "" {
		k.answer(g.ID, g.TTL, sent)
	}
	return err
}

// stream passes a stream's messages through the gate, and times the keepalives on it.
func (k *keepaliveTrack) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	k.gate.wait()
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &trackedStream{ClientStream: s, k: k}, nil
}

type trackedStream struct {
	grpc.ClientStream
	k *keepaliveTrack

	mu   sync.Mutex
	sent []keepaliveSent // keepalive requests not answered yet, oldest first
}

type keepaliveSent struct {
	lease int64
	at    time.Time
}

func (s *trackedStream) SendMsg(m any) error {
	s.k.gate.wait()
	if r, ok := m.(*pb.LeaseKeepAliveRequest); ok {
		s.mu.Lock()
		s.sent = append(s.sent, keepaliveSent{lease: r.ID, at: time.Now()})
		s.mu.Unlock()
	}
	return s.ClientStream.SendMsg(m)
}

func (s *trackedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	s.k.gate.wait()
	if r, ok := m.(*pb.LeaseKeepAliveResponse); ok && err == nil {
		s.mu.Lock()
		var sent keepaliveSent
		found := false
		for len(s.sent) > 0 && !found {
			sent, s.sent = s.sent[0], s.sent[1:]
			found = sent.lease == r.ID
		}
		s.mu.Unlock()
		if found {
			s.k.answer(r.ID, r.TTL, sent.at)
		}
	}
	return err
}
