package systems

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// A node's clock moves as the clock shim, loaded into it with LD_PRELOAD, maps a file of one
// native-endian int64 (nanoseconds) in the node's directory and adds it to every wall-clock read.
// The file outlives restarts: a node whose clock was wrong comes back with the same wrong clock.

// clockFileName is the per-node file the clock shim maps: one native-endian int64, nanoseconds.
const clockFileName = "clock.offset"

// ClockFile is the clock shim's offset file of a node whose directory is dir.
func ClockFile(dir string) string { return filepath.Join(dir, clockFileName) }

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
