package workloads

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/locks"
)

// CrashHolding is the crash point of a process that holds a lease, before it works or releases.
const CrashHolding locks.CrashPoint = "holding"

// CrashAny matches whichever crash point a process reaches first.
const CrashAny locks.CrashPoint = "any"

// ClientFaults is how the client-side nemeses reach the workload's processes: pauses (Pauses),
// crashes at named points, and each slot's wall clock. A goroutine cannot be stopped or killed from
// outside, so the processes cooperate: they pass crash and pause points, and their locks read the
// slot's clock through Options.Clock.
type ClientFaults struct {
	Pauses *Pauses

	clients int
	mu      sync.Mutex
	crash   *crashReq
	offsets map[int]time.Duration // slot -> wall-clock offset
	pids    map[int]int           // slot -> its current process id
	// shifters: slot -> its current lock, when that lock keeps its own clock (a client program
	// with the clock shim) rather than reading Options.Clock.
	shifters map[int]locks.ClockShifter
}

type crashReq struct {
	point  locks.CrashPoint
	caught chan int
}

// NewClientFaults makes the rendezvous for a workload of clients slots.
func NewClientFaults(clients int) *ClientFaults {
	return &ClientFaults{Pauses: NewPauses(), clients: clients, offsets: map[int]time.Duration{}, pids: map[int]int{}, shifters: map[int]locks.ClockShifter{}}
}

// Crash waits until a process reaches point (or any point, with CrashAny) and kills it there; it
// returns the process's id. The process records what it was doing as unknown and never releases.
func (f *ClientFaults) Crash(ctx context.Context, point locks.CrashPoint) (int, error) {
	r := &crashReq{point: point, caught: make(chan int, 1)}
	f.mu.Lock()
	if f.crash != nil {
		f.mu.Unlock()
		return 0, errors.New("another crash is waiting for its process")
	}
	f.crash = r
	f.mu.Unlock()
	select {
	case pid := <-r.caught:
		return pid, nil
	case <-ctx.Done():
		f.mu.Lock()
		taken := f.crash != r
		f.crash = nil
		f.mu.Unlock()
		if taken { // caught just as the wait ended
			return <-r.caught, nil
		}
		return 0, ctx.Err()
	}
}

// crashes reports whether process pid dies at point: a waiting crash request for it takes the pid.
func (f *ClientFaults) crashes(pid int, point locks.CrashPoint) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.crash
	if r == nil || (r.point != point && r.point != CrashAny) {
		return false
	}
	f.crash = nil
	r.caught <- pid
	return true
}

// CrashHook is the Options.Crash of process pid's lock.
func (f *ClientFaults) CrashHook(pid int) func(locks.CrashPoint) error {
	return func(p locks.CrashPoint) error {
		if f.crashes(pid, p) {
			return fmt.Errorf("%w at %s", locks.ErrCrashed, p)
		}
		return nil
	}
}

// Clock is the wall clock of slot: the real time plus the slot's offset.
func (f *ClientFaults) Clock(slot int) func() time.Time {
	return func() time.Time {
		f.mu.Lock()
		off := f.offsets[slot]
		f.mu.Unlock()
		return time.Now().Add(off)
	}
}

// ShiftClock sets slot's wall-clock offset and returns the slot's current process id. A lock with
// a clock of its own (ClockShifter) is moved at once.
func (f *ClientFaults) ShiftClock(slot int, offset time.Duration) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if offset == 0 {
		delete(f.offsets, slot)
	} else {
		f.offsets[slot] = offset
	}
	if s, ok := f.shifters[slot]; ok {
		s.ShiftClock(offset) // a program already gone has no clock left to move
	}
	if pid, ok := f.pids[slot]; ok {
		return pid
	}
	return slot
}

// Slots is the number of client slots.
func (f *ClientFaults) Slots() int { return f.clients }

// running notes slot's current process id and lock, for the events of client faults. A lock with a
// clock of its own starts at the slot's offset, as a restarted program on a skewed host would.
func (f *ClientFaults) running(slot, pid int, lock locks.Locker) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pids[slot] = pid
	delete(f.shifters, slot)
	if s, ok := lock.(locks.ClockShifter); ok {
		f.shifters[slot] = s
		if off := f.offsets[slot]; off != 0 {
			s.ShiftClock(off)
		}
	}
}
