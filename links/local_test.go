package links

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// A dialled connection fails as a direct dial does where a path through the listener would be
// accepted and closed: a node that is down, and a link set that is closed, refuse it with a dial
// error, which tells a lock that its request was never sent.
func TestDialRefusesAsADirectDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	set := New()
	defer set.Close()
	l, err := set.Add("c1", "n1", down)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := l.Dial(context.Background(), "tcp", l.Addr); !isDialError(err) {
		t.Fatalf("dialling a down node through its link: %v %v, want a dial error", c, err)
	}
	up, err := set.Add("c1", "n2", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	set.Close()
	if c, err := up.Dial(context.Background(), "tcp", up.Addr); !isDialError(err) {
		t.Fatalf("dialling through a closed link: %v %v, want a dial error", c, err)
	}
}

func isDialError(err error) bool {
	op, ok := errors.AsType[*net.OpError](err)
	return ok && op.Op == "dial"
}

// A deadline the client set before a hand-over still ends its read after it, at its time: the
// hand-over's own interruption is not the client's timeout, and the client's is not lost.
func TestDialedDeadlineOutlivesTheHandOver(t *testing.T) {
	set := New()
	defer set.Close()
	silent := serveEach(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	l, err := set.Add("c1", "n1", silent)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.Dial(context.Background(), "tcp", l.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	began := time.Now()
	c.SetReadDeadline(began.Add(600 * time.Millisecond))
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		read <- err
	}()
	time.Sleep(150 * time.Millisecond)
	if err := l.AddToxic(Toxic{Name: "slow", Type: "latency", Stream: "downstream", Attributes: map[string]any{"latency": 10}}); err != nil {
		t.Fatal(err)
	}
	if chained, fast := l.counts(); chained != 1 || fast != 0 {
		t.Fatalf("with a toxic the connection should be in the chain: %d chained, %d direct", chained, fast)
	}
	err = <-read
	took := time.Since(began)
	if !errors.Is(err, os.ErrDeadlineExceeded) || took < 550*time.Millisecond || took > 2*time.Second {
		t.Fatalf("the read ended after %v with %v, want the client's deadline at 600ms", took, err)
	}
	// The connection still carries data both ways after the timeout, through the chain.
	c.SetReadDeadline(time.Time{})
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("write after the hand-over: %v", err)
	}
}

// Renewing a link ends the connections dialled through it, those that went to the node directly and
// those in the chain alike: the client reads EOF, as from a proxy that closed its side.
func TestRenewEndsDialedConnections(t *testing.T) {
	for _, chained := range []bool{false, true} {
		set := New()
		l, err := set.Add("c1", "n1", echoServer(t))
		if err != nil {
			t.Fatal(err)
		}
		if chained {
			if err := l.AddToxic(Toxic{Name: "slow", Type: "latency", Stream: "upstream", Attributes: map[string]any{"latency": 1}}); err != nil {
				t.Fatal(err)
			}
		}
		c, err := l.Dial(context.Background(), "tcp", l.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := echoWithin(c, "before\n", time.Second); err != nil {
			t.Fatalf("chained %v, before the renewal: %v", chained, err)
		}
		if err := set.Renew(l); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("chained %v: a read after the renewal gave %v, want EOF", chained, err)
		}
		c.Close()
		again, err := l.Dial(context.Background(), "tcp", l.Addr)
		if err != nil {
			t.Fatalf("chained %v: the renewed link refuses: %v", chained, err)
		}
		if err := echoWithin(again, "after\n", time.Second); err != nil {
			t.Fatalf("chained %v, through the renewed link: %v", chained, err)
		}
		again.Close()
		set.Close()
	}
}
