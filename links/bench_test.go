package links

import (
	"io"
	"net"
	"testing"
)

// BenchmarkRoundTrip is one small request and its echo through a link with no toxic, as a lock's
// command and reply at the ceiling: `go test ./links -run '^$' -bench RoundTrip`. Its CPU
// (user+sys, e.g. under /usr/bin/time) is the link's own cost, which a loaded machine's wall time
// hides.
func BenchmarkRoundTrip(b *testing.B) {
	set := New()
	defer set.Close()
	l, err := set.Add("c1", "n1", echoServer(b))
	if err != nil {
		b.Fatal(err)
	}
	c, err := net.Dial("tcp", l.Addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte("*5\r\n$3\r\nSET\r\n$10\r\nlockpick:0\r\n$20\r\n01234567890123456789\r\n$2\r\nNX\r\n")
	buf := make([]byte, len(req))
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
}
