package systems

import (
	"fmt"
	"time"

	"github.com/lockpick-dev/lockpick/clusters"
)

// The local backend moves clocks as clusters.Local does: the clock shim maps a file of one
// native-endian int64 (nanoseconds) in the node's directory and adds it to every wall-clock read.

func clockFile(dir string) string { return clusters.ClockFile(dir) }

func initClockFile(path string) error { return clusters.InitClockFile(path) }

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
	if err := clusters.WriteClockOffset(clockFile(p.dir), offset); err != nil {
		return fmt.Errorf("set clock of %s: %w", name, err)
	}
	return nil
}

// ClockOffset implements Backend: the node's TIME against the midpoint of the shortest of three
// round trips.
func (b *local) ClockOffset(name string) (time.Duration, error) {
	p, err := b.proc(name)
	if err != nil {
		return 0, err
	}
	off, err := clusters.MeasureClockOffset(p.addr)
	if err != nil {
		return 0, fmt.Errorf("measure clock of %s: %w", name, err)
	}
	return off, nil
}
