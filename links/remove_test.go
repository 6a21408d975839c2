package links

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// Removing a stall whose held data has nowhere to go (the far end died while the link was stalled)
// hangs in toxiproxy for 5 s a chunk, 4 minutes for these 50; the removal is bounded instead: the
// link is renewed, its other toxics stay, and it carries traffic again once they go.
func TestRemovalOfAStallIntoADeadPeerIsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	set := New()
	defer set.Close()
	l, err := set.Add("c1", "n1", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", l.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	up, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range Stall("cut") {
		if err := l.AddToxic(tx); err != nil {
			t.Fatal(err)
		}
	}
	for range 50 { // separate chunks, each held by the stall
		if _, err := c.Write(make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	up.Close() // the peer dies behind the stall
	go io.Copy(io.Discard, c)

	began := time.Now()
	if err := l.RemoveToxic(context.Background(), "cut-upstream"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > RemoveBound+time.Second {
		t.Fatalf("removal took %v, bound %v", took, RemoveBound)
	}

	// The downstream stall is still in effect on the renewed link: a reply is held back.
	echo := func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		io.Copy(s, s)
	}
	go echo()
	c2, err := net.Dial("tcp", l.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	c2.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c2.Read(make([]byte, 4)); err == nil {
		t.Fatalf("read %d bytes through a link whose downstream stall should have stayed", n)
	}
	if err := l.RemoveToxic(context.Background(), "cut-downstream"); err != nil {
		t.Fatal(err)
	}
	c2.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c2, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("after the heal the link echoed %q (%v)", buf, err)
	}
}
