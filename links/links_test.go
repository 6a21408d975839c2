package links

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A link carries traffic to its node, and a toxic on it is a real fault: a timeout toxic makes
// requests hang until the client gives up, and removing it heals the path.
func TestLinkCarriesTrafficAndToxicsCutIt(t *testing.T) {
	node := redisNode(t)
	set := New()
	defer set.Close()
	l, err := set.Add("c1", node.Name, node.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if l.Addr == node.Addr() || l.Addr == "" {
		t.Fatalf("link listens on %q, want its own port", l.Addr)
	}
	if got, err := set.Get("c1", node.Name); err != nil || got != l {
		t.Fatalf("Get: %v %v", got, err)
	}
	if _, err := set.Get("c2", node.Name); err == nil {
		t.Fatal("Get found a link that does not exist")
	}
	rc := redis.NewClient(&redis.Options{Addr: l.Addr, MaxRetries: -1, DialerRetries: 1, ReadTimeout: 200 * time.Millisecond, DisableIdentity: true, Protocol: 2})
	defer rc.Close()
	ctx := context.Background()
	if err := rc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("through the link: %v", err)
	}

	if err := l.AddToxic(Toxic{Name: "cut", Type: "timeout", Stream: "upstream", Attributes: map[string]any{"timeout": 0}}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := rc.Get(ctx, "k").Err(); err == nil {
		t.Fatal("a request crossed a cut link")
	}
	if took := time.Since(began); took < 150*time.Millisecond {
		t.Fatalf("a cut link answered in %v: it should hang until the client times out", took)
	}
	if err := l.RemoveToxic(ctx, "cut"); err != nil {
		t.Fatal(err)
	}
	if v, err := rc.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after the heal: %q %v", v, err)
	}
}

// A stalled link whose node died: Renew returns at once, where removing the stall makes toxiproxy
// flush every held chunk into the dead connection with a 5 s wait each for as long as the live end
// keeps sending; the link's old connection is closed, its toxics gone, and it carries new ones.
func TestRenewLetsAStallOnADeadNodeGo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	set := New()
	defer set.Close()
	l, err := set.Add("n2", "n1", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client, err := net.Dial("tcp", l.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server := <-accepted
	for _, tx := range Stall("stall") {
		if err := l.AddToxic(tx); err != nil {
			t.Fatal(err)
		}
	}
	// The live end keeps talking (a replica's acknowledgements) while the node behind the link dies.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if _, err := client.Write([]byte("REPLCONF ACK 1\r\n")); err != nil {
					return
				}
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	server.(*net.TCPConn).SetLinger(0)
	server.Close()
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	if err := set.Renew(l); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("renewing the stalled link took %v", took)
	}
	client.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := client.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the old connection through the link is still open after Renew (read: %v)", err)
	}
	if err := l.RemoveToxic(context.Background(), "stall-upstream"); err == nil {
		t.Fatal("the stall is still on the renewed link")
	}
	c2, err := net.Dial("tcp", l.Addr)
	if err != nil {
		t.Fatalf("the link refuses connections after Renew: %v", err)
	}
	defer c2.Close()
	s2 := <-accepted
	defer s2.Close()
	if _, err := c2.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	s2.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := s2.Read(make([]byte, 16)); err != nil || n != 6 {
		t.Fatalf("through the renewed link: %d bytes, %v", n, err)
	}
}

// testNode is a redis-server the test runs itself: systems, which runs nodes, imports links.
type testNode struct{ Name, addr string }

func (n testNode) Addr() string { return n.addr }

// redisNode runs one redis-server on a free loopback port until the test ends.
func redisNode(t *testing.T) testNode {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not found: install it with `apt-get install redis-server`")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return testNode{Name: "n1", addr: addr}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not listen within 10s", addr)
		}
	}
}
