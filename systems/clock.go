package systems

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/lockpick-dev/lockpick/clusters"
)

// The local backend moves clocks as clusters.Local does: the clock shim maps a file of one
// native-endian int64 (nanoseconds) in the node's directory and adds it to every wall-clock read.

func clockFile(dir string) string { return filepath.Join(dir, "clock.offset") }

// initClockFile creates a zero offset file unless one exists (a node's offset survives restarts).
func initClockFile(path string) error {
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

// ClockShim implements Backend.
func (b *local) ClockShim() bool { return b.shim != "" }

// SetClockOffset implements Backend. It works whether the node runs or not.
func (b *local) SetClockOffset(name string, offset time.Duration) error {
	p, err := b.proc(name)
	if err != nil {
		return err
	}
	if b.shim == "" {
		return fmt.Errorf("node %s runs without the clock shim: its clock cannot be moved", name)
	}
	f, err := os.OpenFile(clockFile(p.dir), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("set clock of %s: %w", name, err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("set clock of %s: mmap: %w", name, err)
	}
	defer syscall.Munmap(mem)
	// One atomic 8-byte store on the page-aligned mapping: the shim never reads a torn value.
	atomic.StoreInt64((*int64)(unsafe.Pointer(&mem[0])), int64(offset))
	return nil
}

// ClockOffset implements Backend: the node's TIME against the midpoint of the shortest of three
// round trips.
func (b *local) ClockOffset(name string) (time.Duration, error) {
	p, err := b.proc(name)
	if err != nil {
		return 0, err
	}
	rc := clusters.AdminClient(p.addr)
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := rc.Ping(ctx).Err(); err != nil {
		return 0, fmt.Errorf("measure clock of %s: %w", name, err)
	}
	var best, rtt time.Duration = 0, -1
	for range 3 {
		before := time.Now()
		t, err := rc.Time(ctx).Result()
		after := time.Now()
		if err != nil {
			return 0, fmt.Errorf("measure clock of %s: %w", name, err)
		}
		if d := after.Sub(before); rtt < 0 || d < rtt {
			rtt, best = d, t.Sub(before.Add(d/2))
		}
	}
	return best, nil
}
