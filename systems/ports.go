package systems

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// ReservePort opens a loopback listener on a free port for a node, chosen at random below the
// kernel's ephemeral range. A node's port is free between its reservation's close and the node's
// bind, and again while the node is down for a restart; a port from the ephemeral range can be
// taken then as the source port of any outgoing connection (the harness's own proxies make
// thousands), and the node fails with "address already in use". Below the range only another
// listener can take it.
func ReservePort() (net.Listener, error) {
	lo, hi := nodePortRange()
	if hi-lo < 1024 {
		return net.Listen("tcp", "127.0.0.1:0")
	}
	var err error
	for range 64 {
		p := lo + rand.IntN(hi-lo+1)
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("find a free port in %d..%d: %w", lo, hi, err)
}

// ReservePorts holds count free ports open with ReservePort, so that nothing else this process
// listens on (a link, the router) can take one before its node binds it; the caller closes each just
// before its node starts.
func ReservePorts(count int) ([]net.Listener, error) {
	var ls []net.Listener
	for range count {
		l, err := ReservePort()
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// nodePortRange is the range node ports are drawn from: up to 16384 ports just below the ephemeral
// range (/proc/sys/net/ipv4/ip_local_port_range), never below 1024.
func nodePortRange() (lo, hi int) {
	ephemeral, err := ephemeralLow()
	if err != nil {
		ephemeral = 32768 // Linux's default
	}
	hi = ephemeral - 1
	return max(1024, hi-16383), hi
}

func ephemeralLow() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, errors.New("unexpected ip_local_port_range")
	}
	return strconv.Atoi(f[0])
}

// ErrPortTaken marks a node that could not bind the port chosen for it: another program (another
// run of this process, or any other) took it between its reservation and the node's bind. Nothing
// of the system under test was exercised, so the caller may start again on fresh ports.
var ErrPortTaken = errors.New("its port was taken before it could bind it")

// StartFailure is the error of a node that exited during start-up, with the end of its output;
// it wraps ErrPortTaken when the output says its port was in use.
func StartFailure(node, output string) error {
	if strings.Contains(strings.ToLower(output), "address already in use") {
		return fmt.Errorf("node %s exited during start-up (%w): %s", node, ErrPortTaken, output)
	}
	return fmt.Errorf("node %s exited during start-up: %s", node, output)
}
