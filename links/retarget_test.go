package links

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// namedServer greets every connection with its name, then keeps it open until the test ends.
func namedServer(t *testing.T, name string) string {
	return serveEach(t, func(c net.Conn) {
		c.Write([]byte(name + "\n"))
		io.Copy(io.Discard, c)
	})
}

// greeting reads the first line a server sends through the link, within d.
func greeting(t *testing.T, c net.Conn, d time.Duration) (string, error) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// A retargeted link keeps its address, ends the connections to the old server, sends new ones to
// the new server, and keeps its toxics in effect.
func TestRetargetMovesClientsAndKeepsToxics(t *testing.T) {
	for _, d := range dialers() {
		t.Run(d.name, func(t *testing.T) { retargetMoves(t, d) })
	}
}

func retargetMoves(t *testing.T, d dialer) {
	a, b := namedServer(t, "a"), namedServer(t, "b")
	set := New()
	defer set.Close()
	l, err := set.Add("c1", "vip", a)
	if err != nil {
		t.Fatal(err)
	}
	old, err := d.dial(l)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if got, err := greeting(t, old, time.Second); got != "a" {
		t.Fatalf("before the retarget: %q %v, want a", got, err)
	}
	addr := l.Addr
	if err := set.Retarget(l, b); err != nil {
		t.Fatal(err)
	}
	if l.Addr != addr || l.CurrentUpstream() != b {
		t.Fatalf("after the retarget: listens on %s (was %s), forwards to %s (want %s)", l.Addr, addr, l.CurrentUpstream(), b)
	}
	old.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := old.Read(make([]byte, 8)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the connection to the old server stayed open: %v", err)
	}
	moved, err := d.dial(l)
	if err != nil {
		t.Fatal(err)
	}
	defer moved.Close()
	if got, err := greeting(t, moved, time.Second); got != "b" {
		t.Fatalf("after the retarget: %q %v, want b", got, err)
	}
	if err := l.AddToxic(Toxic{Name: "cut", Type: "timeout", Stream: "downstream", Attributes: map[string]any{"timeout": 0}}); err != nil {
		t.Fatal(err)
	}
	if err := set.Retarget(l, a); err != nil {
		t.Fatal(err)
	}
	cut, err := d.dial(l)
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	if got, err := greeting(t, cut, 300*time.Millisecond); err == nil {
		t.Fatalf("a cut link delivered %q after a retarget: the retarget dropped its toxic", got)
	}
}
