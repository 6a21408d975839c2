package systems

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The host clock fault (clock:source=host, --backend ssh) moves a host's real kernel clock, as
// Jepsen's bump-time and strobe-time do: lockpick's own binary, uploaded into the run's directory,
// steps CLOCK_REALTIME by a signed offset (adjtimex ADJ_SETOFFSET: one relative step, no read and
// set race) and makes the clock run fast (adjtimex tick and frequency). Before it changes anything
// it writes a record beside it, HostClockRecordName: the net offset it has applied and the tick and
// frequency it found. The heal, the run's close and lockpick clean all restore from that record
// alone: step back by the net offset, put the tick and frequency back, remove the record.

// HostClockRecordName is the record of a host clock fault in the run's directory on a host.
const HostClockRecordName = "hostclock.json"

// HostClockRecord is what host clock faults did to one host's kernel clock.
type HostClockRecord struct {
	// Net is the sum of the steps applied, nanoseconds, not counting a drift in progress.
	Net int64 `json:"net_ns"`
	// Tick (microseconds per kernel tick) and Freq (adjtimex's scaled ppm) are what the host had
	// before the first fault: what a restore puts back.
	Tick int64 `json:"tick"`
	Freq int64 `json:"freq"`
	// Rate is the share by which the clock runs fast now (0: as found), since Since
	// (CLOCK_MONOTONIC_RAW, nanoseconds, which no frequency change moves).
	Rate  float64 `json:"rate,omitempty"`
	Since int64   `json:"since_raw_ns,omitempty"`
}

// Offset is how far the clock is from where it would be without the faults, at raw time now.
func (r HostClockRecord) Offset(now int64) time.Duration {
	return time.Duration(r.Net + r.gain(now))
}

// gain is what the drift in progress has added since Since.
func (r HostClockRecord) gain(now int64) int64 {
	if r.Rate == 0 || now <= r.Since {
		return 0
	}
	return int64(math.Round(float64(now-r.Since) * r.Rate))
}

// fold moves the drift's gain so far into Net and restarts it at now.
func (r *HostClockRecord) fold(now int64) {
	r.Net += r.gain(now)
	r.Since = now
}

// driftSetting is the tick and frequency that make a clock found at tick and freq run fast by
// rate: whole ticks (one microsecond of a 10000 µs tick is 100 ppm; the kernel takes ±10%), the
// rest in frequency (which it takes within ±500 ppm).
func driftSetting(tick, freq int64, rate float64) (int64, int64, error) {
	if rate < -0.09 || rate > 0.09 {
		return 0, 0, fmt.Errorf("rate %g: a kernel clock runs at most 9%% off its tick", rate)
	}
	dTick := int64(math.Floor(rate*float64(tick) + 1e-9)) // 1e-9: 0.0003×10000 is 2.9999…
	rest := rate - float64(dTick)/float64(tick)
	f := freq + int64(math.Round(rest*1e6*65536))
	const maxFreq = 500 * 65536
	if f > maxFreq || f < -maxFreq {
		return 0, 0, fmt.Errorf("rate %g: frequency %d is beyond the kernel's ±500 ppm", rate, f/65536)
	}
	return tick + dTick, f, nil
}

// stepTimeval is d as adjtimex's ADJ_SETOFFSET takes it without ADJ_NANO: whole seconds (negative
// for a step back) and microseconds in [0, 1e6).
func stepTimeval(d time.Duration) unix.Timeval {
	us := d.Microseconds()
	sec, rest := us/1e6, us%1e6
	if rest < 0 {
		sec, rest = sec-1, rest+1e6
	}
	return unix.Timeval{Sec: sec, Usec: rest}
}

// rawNow is CLOCK_MONOTONIC_RAW in nanoseconds.
func rawNow() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts); err != nil {
		return 0, fmt.Errorf("clock_gettime(CLOCK_MONOTONIC_RAW): %w", err)
	}
	return ts.Nano(), nil
}

// stepClock steps CLOCK_REALTIME by d.
func stepClock(d time.Duration) error {
	if d == 0 {
		return nil
	}
	tx := unix.Timex{Modes: unix.ADJ_SETOFFSET, Time: stepTimeval(d)}
	if _, err := unix.Adjtimex(&tx); err != nil {
		return fmt.Errorf("adjtimex(ADJ_SETOFFSET %v): %w", d, err)
	}
	return nil
}

// setTickFreq sets the kernel clock's tick and frequency.
func setTickFreq(tick, freq int64) error {
	tx := unix.Timex{Modes: unix.ADJ_TICK | unix.ADJ_FREQUENCY, Tick: tick, Freq: freq}
	if _, err := unix.Adjtimex(&tx); err != nil {
		return fmt.Errorf("adjtimex(tick %d, freq %d): %w", tick, freq, err)
	}
	return nil
}

// readTickFreq reads the kernel clock's tick and frequency, changing nothing.
func readTickFreq() (int64, int64, error) {
	var tx unix.Timex
	if _, err := unix.Adjtimex(&tx); err != nil {
		return 0, 0, fmt.Errorf("adjtimex: %w", err)
	}
	return tx.Tick, tx.Freq, nil
}

// hostClockFile is a record opened and locked: one change at a time.
type hostClockFile struct {
	path string
	f    *os.File
	rec  HostClockRecord
	// fresh: there was no record, and rec holds what the kernel has now.
	fresh bool
}

// openHostClock locks the record at path (made from what the kernel has when absent).
func openHostClock(path string) (*hostClockFile, error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("host clock record: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("host clock record: lock: %w", err)
	}
	h := &hostClockFile{path: path, f: f}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		h.fresh = true
		h.rec.Tick, h.rec.Freq, err = readTickFreq()
	case err == nil:
		err = json.Unmarshal(b, &h.rec)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("host clock record %s: %w", path, err)
	}
	return h, nil
}

// save writes the record (a new file renamed over the old: never half written).
func (h *hostClockFile) save() error {
	b, _ := json.Marshal(h.rec)
	tmp := h.path + ".new"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("host clock record: %w", err)
	}
	return os.Rename(tmp, h.path)
}

// close unlocks the record.
func (h *hostClockFile) close() { h.f.Close() }

// HostClockSet steps the host's clock so that it is offset from where it would be without the
// faults (0: back), keeping the record at path; it returns the offset now.
func HostClockSet(path string, offset time.Duration) (time.Duration, error) {
	h, err := openHostClock(path)
	if err != nil {
		return 0, err
	}
	defer h.close()
	now, err := rawNow()
	if err != nil {
		return 0, err
	}
	step := offset - h.rec.Offset(now)
	// The record first: a record that says more than was done is restored to the same place a
	// moment later; a step without a record could not be undone.
	h.rec.Net += int64(step)
	if err := h.save(); err != nil {
		return 0, err
	}
	if err := stepClock(step); err != nil {
		h.rec.Net -= int64(step)
		return 0, errors.Join(err, h.save())
	}
	return h.rec.Offset(now), nil
}

// HostClockDrift makes the host's clock run fast by rate from now (0: at the frequency found),
// keeping the record at path; it returns the offset now.
func HostClockDrift(path string, rate float64) (time.Duration, error) {
	h, err := openHostClock(path)
	if err != nil {
		return 0, err
	}
	defer h.close()
	tick, freq, err := driftSetting(h.rec.Tick, h.rec.Freq, rate)
	if err != nil {
		return 0, err
	}
	now, err := rawNow()
	if err != nil {
		return 0, err
	}
	h.rec.fold(now)
	h.rec.Rate = rate
	if err := h.save(); err != nil {
		return 0, err
	}
	if err := setTickFreq(tick, freq); err != nil {
		return 0, err
	}
	return h.rec.Offset(now), nil
}

// HostClockRestore puts the host's clock back as the record at path says, removes the record, and
// says what it did ("" when there was no record).
func HostClockRestore(path string) (string, error) {
	h, err := openHostClock(path)
	if err != nil {
		return "", err
	}
	defer h.close()
	if h.fresh {
		return "", nil
	}
	if err := setTickFreq(h.rec.Tick, h.rec.Freq); err != nil {
		return "", err
	}
	now, err := rawNow()
	if err != nil {
		return "", err
	}
	back := -h.rec.Offset(now)
	if err := stepClock(back); err != nil {
		return "", err
	}
	if err := errors.Join(os.Remove(path), os.Remove(path+".lock")); err != nil {
		return "", fmt.Errorf("host clock record: %w", err)
	}
	return fmt.Sprintf("clock stepped by %v, tick %d and frequency %.3f ppm put back", back.Round(time.Microsecond), h.rec.Tick, float64(h.rec.Freq)/65536), nil
}

// HostClockOffset is the offset the record at path says the host's clock has now (0 without one).
func HostClockOffset(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var rec HostClockRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return 0, fmt.Errorf("host clock record %s: %w", path, err)
	}
	now, err := rawNow()
	if err != nil {
		return 0, err
	}
	return rec.Offset(now), nil
}

// timeDaemons are the programs that discipline a clock (their /proc/PID/comm): each fights a step.
var timeDaemons = []string{"chronyd", "ntpd", "openntpd", "systemd-timesyn", "timesyncd", "ptp4l", "phc2sys"}

// HostClockCheck says what on this host stands in the way of moving its clock: no permission
// (CAP_SYS_TIME: root), or a daemon that disciplines the clock. Empty: nothing.
func HostClockCheck() []string {
	var problems []string
	tick, _, err := readTickFreq()
	if err == nil {
		// Setting the tick it has changes nothing, and needs the permission a step needs.
		tx := unix.Timex{Modes: unix.ADJ_TICK, Tick: tick}
		_, err = unix.Adjtimex(&tx)
	}
	if err != nil {
		problems = append(problems, fmt.Sprintf("cannot set the clock (%v): log in as root (CAP_SYS_TIME)", err))
	}
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	seen := map[string]bool{}
	for _, c := range comms {
		b, err := os.ReadFile(c)
		name := strings.TrimSpace(string(b))
		if err != nil || seen[name] || !isTimeDaemon(name) {
			continue
		}
		seen[name] = true
		problems = append(problems, fmt.Sprintf("%s runs (pid %s) and would fight a step", name, filepath.Base(filepath.Dir(c))))
	}
	return problems
}

func isTimeDaemon(comm string) bool {
	for _, d := range timeDaemons {
		if comm == d {
			return true
		}
	}
	return false
}

// HostClockArgs are the arguments of lockpick's binary that make one change of a host's clock,
// keeping the record at record: set OFFSET, drift RATE, offset, restore or check.
func HostClockArgs(record string, op ...string) []string {
	return append([]string{"internal", "hostclock", "--record", record}, op...)
}

// RunHostClock makes one change of this host's clock (HostClockArgs) and returns its line of
// output: "offset NS" after set, drift and offset; what was restored; the check's problems.
func RunHostClock(record string, args []string) (string, error) {
	if record == "" && args[0] != "check" {
		return "", errors.New("hostclock: give --record FILE")
	}
	arg := func() (string, error) {
		if len(args) != 2 {
			return "", fmt.Errorf("hostclock %s takes one value", args[0])
		}
		return args[1], nil
	}
	var off time.Duration
	var err error
	switch args[0] {
	case "set":
		var v string
		if v, err = arg(); err == nil {
			var d time.Duration
			if d, err = time.ParseDuration(v); err == nil {
				off, err = HostClockSet(record, d)
			}
		}
	case "drift":
		var v string
		if v, err = arg(); err == nil {
			var rate float64
			if rate, err = strconv.ParseFloat(v, 64); err == nil {
				off, err = HostClockDrift(record, rate)
			}
		}
	case "offset":
		off, err = HostClockOffset(record)
	case "restore":
		return HostClockRestore(record)
	case "check":
		return strings.Join(HostClockCheck(), "\n"), nil
	default:
		return "", fmt.Errorf("hostclock %s: use set, drift, offset, restore or check", args[0])
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("offset %d", int64(off)), nil
}

// parseHostClockOffset reads RunHostClock's "offset NS".
func parseHostClockOffset(out string) (time.Duration, error) {
	f := strings.Fields(out)
	if len(f) != 2 || f[0] != "offset" {
		return 0, fmt.Errorf("host clock: unexpected answer %q", strings.TrimSpace(out))
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	return time.Duration(n), err
}
