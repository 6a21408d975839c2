package clusters

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// clockFileName is the per-node file the clock shim maps: one native-endian int64, nanoseconds.
const clockFileName = "clock.offset"

func (n *Node) clockFile() string { return ClockFile(n.Dir) }

// ClockFile is the clock shim's offset file of a node whose directory is dir.
func ClockFile(dir string) string { return filepath.Join(dir, clockFileName) }

// initClockFile is InitClockFile for this package's nodes.
func initClockFile(path string) error { return InitClockFile(path) }

// InitClockFile creates a zero offset file unless one exists (a node's offset survives restarts).
func InitClockFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("clock file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("clock file: %w", err)
	}
	if st.Size() < 8 {
		if err := f.Truncate(8); err != nil {
			return fmt.Errorf("clock file: %w", err)
		}
	}
	return nil
}

// ClockShim reports whether the nodes run with the clock shim, so that their clocks can be moved.
func (c *Local) ClockShim() bool { return c.cfg.ClockShim != "" }

// SetClockOffset shifts the node's wall clock to the real time plus offset. It works whether the
// node runs or not: the shim of a running node sees the new value at its next clock read.
func (c *Local) SetClockOffset(node string, offset time.Duration) error {
	n, err := c.Node(node)
	if err != nil {
		return err
	}
	if !c.ClockShim() {
		return fmt.Errorf("node %s runs without the clock shim: its clock cannot be moved", node)
	}
	if err := WriteClockOffset(n.clockFile(), offset); err != nil {
		return fmt.Errorf("set clock of %s: %w", node, err)
	}
	return nil
}

// WriteClockOffset stores offset in the clock shim's file at path, which a running node's shim
// sees at its next clock read.
func WriteClockOffset(path string, offset time.Duration) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap: %w", err)
	}
	defer syscall.Munmap(mem)
	// The mapping is page-aligned; one atomic 8-byte store means the shim never reads a torn value.
	atomic.StoreInt64((*int64)(unsafe.Pointer(&mem[0])), int64(offset))
	return nil
}

// ClockOffset measures how far the node's clock is from the harness's: Redis TIME against the
// midpoint of the round trip. Its error is about half the round trip at most (microseconds here).
func (c *Local) ClockOffset(node string) (time.Duration, error) {
	n, err := c.Node(node)
	if err != nil {
		return 0, err
	}
	off, err := MeasureClockOffset(n.Addr())
	if err != nil {
		return 0, fmt.Errorf("measure clock of %s: %w", node, err)
	}
	return off, nil
}

// MeasureClockOffset is how far the clock of the Redis server at addr is from the harness's: its
// TIME against the midpoint of the shortest of three round trips. Its error is about half that
// round trip at most (microseconds here).
func MeasureClockOffset(addr string) (time.Duration, error) {
	rc := AdminClient(addr)
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// Connect first, so the round trip measured is one command, not a dial.
	if err := rc.Ping(ctx).Err(); err != nil {
		return 0, err
	}
	var best, rtt time.Duration = 0, -1
	for range 3 {
		before := time.Now()
		t, err := rc.Time(ctx).Result()
		after := time.Now()
		if err != nil {
			return 0, err
		}
		if d := after.Sub(before); rtt < 0 || d < rtt {
			rtt, best = d, t.Sub(before.Add(d/2))
		}
	}
	return best, nil
}
