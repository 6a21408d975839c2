package links

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// echoServer answers every connection with what it reads, until the test ends.
func echoServer(t testing.TB) string {
	return serveEach(t, func(c net.Conn) { io.Copy(c, c) })
}

// serveEach listens on loopback until the test ends and runs serve on each connection, closing it
// after.
func serveEach(t testing.TB, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// dialer is one way a client reaches a node through a link.
type dialer struct {
	name string
	dial func(l *Link) (net.Conn, error)
}

// dialers are both ways: the link's listener, and Dial for a client in this process.
func dialers() []dialer {
	return []dialer{
		{"listener", func(l *Link) (net.Conn, error) { return net.Dial("tcp", l.Addr) }},
		{"in process", func(l *Link) (net.Conn, error) { return l.Dial(context.Background(), "tcp", l.Addr) }},
	}
}

// counts counts the link's connections in the toxic chain, and those by plain copy or (from Dial)
// straight to the node.
func (l *Link) counts() (chained, fast int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.connMu.Lock()
	defer l.connMu.Unlock()
	for c := range l.conns {
		if c.chained {
			chained++
		} else {
			fast++
		}
	}
	return chained, fast + len(l.locals)
}

// Toxics added and removed over and over while connections carry data both ways: every byte comes
// back once and in order, whether a connection began by plain copy and was moved into the chain in
// the middle of its stream, or began in the chain.
func TestBytesSurviveToxicsComingAndGoing(t *testing.T) {
	for _, d := range dialers() {
		t.Run(d.name, func(t *testing.T) { bytesSurviveToxics(t, d) })
	}
}

func bytesSurviveToxics(t *testing.T, d dialer) {
	set := New()
	defer set.Close()
	l, err := set.Add("c1", "n1", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var cycles int
	cycled := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				cycled <- nil
				return
			case <-time.After(time.Duration(rand.IntN(15)) * time.Millisecond):
			}
			toxics := []Toxic{
				{Name: "slow", Type: "latency", Stream: "upstream", Attributes: map[string]any{"latency": 1, "jitter": 1}},
				{Name: "sliced", Type: "slicer", Stream: "downstream", Attributes: map[string]any{"average_size": 64, "size_variation": 32, "delay": 0}},
			}
			for _, tx := range toxics {
				if err := l.AddToxic(tx); err != nil {
					cycled <- err
					return
				}
			}
			time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond)
			for _, tx := range toxics {
				if err := l.RemoveToxic(context.Background(), tx.Name); err != nil {
					cycled <- err
					return
				}
			}
			cycles++
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	var conns, moved int
	var mu sync.Mutex
	deadline := time.Now().Add(3 * time.Second)
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for time.Now().Before(deadline) {
				began, err := roundTrips(l, d, rng)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				conns++
				if began {
					moved++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-cycled; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d connections, %d of them began by plain copy; %d toxic cycles", conns, moved, cycles)
	if moved == 0 || cycles < 10 {
		t.Fatalf("the test exercised too little: %d connections began by plain copy, %d toxic cycles", moved, cycles)
	}
}

// roundTrips sends 256 KiB through l in writes of random sizes, reads the echo and compares it,
// and reports whether the connection began by plain copy (or straight to the node).
func roundTrips(l *Link, d dialer, rng *rand.Rand) (bool, error) {
	c, err := d.dial(l)
	if err != nil {
		return false, err
	}
	defer c.Close()
	// The link forwards the connection once it has accepted it: a first round trip waits for that.
	if _, err := c.Write([]byte{0}); err != nil {
		return false, err
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		return false, err
	}
	fast := l.plain(c)
	sent := make([]byte, 256<<10)
	for i := range sent {
		sent[i] = byte(rng.IntN(256))
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(sent))
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, _ := io.ReadFull(c, b)
		got <- b[:n]
	}()
	for off := 0; off < len(sent); {
		n := min(1+rng.IntN(4096), len(sent)-off)
		if _, err := c.Write(sent[off : off+n]); err != nil {
			return false, err
		}
		off += n
	}
	if b := <-got; !bytes.Equal(b, sent) {
		at := 0
		for at < len(b) && b[at] == sent[at] {
			at++
		}
		return false, fmt.Errorf("the echo differs from what was sent at byte %d of %d received", at, len(b))
	}
	return fast, nil
}

// plain says whether the client's connection c goes by plain copy, or (from Dial) to the node.
func (l *Link) plain(client net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.connMu.Lock()
	defer l.connMu.Unlock()
	if lc, ok := client.(*localConn); ok {
		_, direct := l.locals[lc]
		return direct
	}
	from := client.LocalAddr().String()
	for c := range l.conns {
		if c.name == from {
			return !c.chained
		}
	}
	return false
}

// Every fault links are used for acts on a connection that began by plain copy as on one that began
// in toxiproxy's chain: a cut holds the request (both ways, or only the reply), a reset ends the
// connection at once, a latency delays each round trip, a stall holds everything and delivers it
// when removed.
func TestFaultsActOnPlainCopyConnections(t *testing.T) {
	cut := func(stream string) Toxic {
		return Toxic{Name: "cut-" + stream, Type: "timeout", Stream: stream, Attributes: map[string]any{"timeout": 0}}
	}
	reset := func(stream string) Toxic {
		return Toxic{Name: "reset-" + stream, Type: "reset_peer", Stream: stream, Attributes: map[string]any{"timeout": 0}}
	}
	latency := func(stream string) Toxic {
		return Toxic{Name: "latency-" + stream, Type: "latency", Stream: stream, Attributes: map[string]any{"latency": 100}}
	}
	for _, tc := range []struct {
		name   string
		toxics []Toxic
		// check sends a line after the toxics are on and says what went wrong, if anything.
		check func(c net.Conn, l *Link) error
	}{
		{"cut both ways", []Toxic{cut("upstream"), cut("downstream")}, expectSilence},
		{"cut the reply", []Toxic{cut("downstream")}, expectSilence},
		{"reset", []Toxic{reset("upstream"), reset("downstream")}, expectEnd},
		{"latency", []Toxic{latency("upstream"), latency("downstream")}, expectDelay},
		{"stall", Stall("stall"), expectHeldThenDelivered},
	} {
		for _, d := range dialers() {
			t.Run(tc.name+"/"+d.name, func(t *testing.T) {
				set := New()
				defer set.Close()
				l, err := set.Add("c1", "n1", echoServer(t))
				if err != nil {
					t.Fatal(err)
				}
				c, err := d.dial(l)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if err := echoWithin(c, "hello\n", time.Second); err != nil {
					t.Fatalf("before the fault: %v", err)
				}
				if chained, fast := l.counts(); chained != 0 || fast != 1 {
					t.Fatalf("before any toxic the connection should go by plain copy: %d chained, %d plain", chained, fast)
				}
				for _, tx := range tc.toxics {
					if err := l.AddToxic(tx); err != nil {
						t.Fatal(err)
					}
				}
				if chained, fast := l.counts(); chained != 1 || fast != 0 {
					t.Fatalf("with a toxic the connection should be in the chain: %d chained, %d plain", chained, fast)
				}
				if err := tc.check(c, l); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// echoWithin writes line and reads it back within d.
func echoWithin(c net.Conn, line string, d time.Duration) error {
	if _, err := c.Write([]byte(line)); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, len(line))
	if _, err := io.ReadFull(c, b); err != nil {
		return err
	}
	if string(b) != line {
		return errors.New("echo " + string(b) + ", want " + line)
	}
	return nil
}

func expectSilence(c net.Conn, _ *Link) error {
	err := echoWithin(c, "cut\n", 300*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return errors.New("a cut link should hold the request until the reader gives up, got: " + errString(err))
	}
	return nil
}

func expectEnd(c net.Conn, _ *Link) error {
	began := time.Now()
	err := echoWithin(c, "reset\n", 2*time.Second)
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		return errors.New("a reset link should end the connection, got: " + errString(err))
	}
	if took := time.Since(began); took > time.Second {
		return errors.New("the reset took " + took.String())
	}
	return nil
}

func expectDelay(c net.Conn, _ *Link) error {
	began := time.Now()
	if err := echoWithin(c, "slow\n", 2*time.Second); err != nil {
		return err
	}
	if took := time.Since(began); took < 200*time.Millisecond {
		return errors.New("100 ms each way answered in " + took.String())
	}
	return nil
}

func expectHeldThenDelivered(c net.Conn, l *Link) error {
	if err := expectSilence(c, l); err != nil {
		return err
	}
	for _, tx := range Stall("stall") {
		if err := l.RemoveToxic(context.Background(), tx.Name); err != nil {
			return err
		}
	}
	// What the stall held arrives: the line the silent round trip sent, then a new one.
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "cut\n" {
		return errors.New("the held line after the stall: " + string(b) + " " + errString(err))
	}
	return echoWithin(c, "after\n", time.Second)
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
