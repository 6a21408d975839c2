package systems

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A record's offset is its net steps plus what a drift in progress has gained; folding moves the
// gain into the steps without changing the offset.
func TestHostClockRecordOffset(t *testing.T) {
	r := HostClockRecord{Net: int64(2 * time.Second), Rate: 0.01, Since: int64(10 * time.Second)}
	if got := r.Offset(int64(20 * time.Second)); got != 2*time.Second+100*time.Millisecond {
		t.Errorf("offset after 10s at 1%% fast: %v", got)
	}
	if got := r.Offset(int64(5 * time.Second)); got != 2*time.Second {
		t.Errorf("offset before the drift began: %v", got)
	}
	r.fold(int64(20 * time.Second))
	if r.Net != int64(2100*time.Millisecond) || r.Offset(int64(20*time.Second)) != 2100*time.Millisecond {
		t.Errorf("after fold: %+v", r)
	}
	r.Rate = 0
	if got := r.Offset(int64(time.Hour)); got != 2100*time.Millisecond {
		t.Errorf("no drift: %v", got)
	}
}

// A rate is whole ticks plus the rest in frequency, within what the kernel takes.
func TestDriftSetting(t *testing.T) {
	for _, c := range []struct {
		rate       float64
		tick, freq int64
	}{
		{0, 10000, 65536},
		{0.005, 10050, 65536},
		{0.00505, 10050, 65536 + 50*65536},
		{-0.005, 9950, 65536},
		{0.0003, 10003, 65536},
		{0.00025, 10002, 65536 + 50*65536},
	} {
		tick, freq, err := driftSetting(10000, 65536, c.rate)
		if err != nil || tick != c.tick || freq != c.freq {
			t.Errorf("rate %g: tick %d freq %d (%v), want %d %d", c.rate, tick, freq, err, c.tick, c.freq)
		}
	}
	if _, _, err := driftSetting(10000, 0, 0.2); err == nil {
		t.Error("a rate of 20% was taken")
	}
	if _, _, err := driftSetting(10000, 499*65536, 0.00005); err == nil {
		t.Error("a frequency beyond 500 ppm was taken")
	}
}

// A step back is negative seconds and non-negative microseconds, as ADJ_SETOFFSET wants.
func TestStepTimeval(t *testing.T) {
	for d, want := range map[time.Duration][2]int64{
		1500 * time.Millisecond:  {1, 500000},
		-1500 * time.Millisecond: {-2, 500000},
		-2 * time.Second:         {-2, 0},
		-1 * time.Microsecond:    {-1, 999999},
	} {
		tv := stepTimeval(d)
		if tv.Sec != want[0] || tv.Usec != want[1] {
			t.Errorf("%v: %d s %d µs, want %v", d, tv.Sec, tv.Usec, want)
		}
	}
}

// Without a record there is nothing to restore and the offset is zero; a bad call says how to call.
func TestHostClockWithoutRecord(t *testing.T) {
	rec := filepath.Join(t.TempDir(), HostClockRecordName)
	if off, err := HostClockOffset(rec); err != nil || off != 0 {
		t.Errorf("offset without a record: %v, %v", off, err)
	}
	if out, err := RunHostClock(rec, []string{"restore"}); err != nil || out != "" {
		t.Errorf("restore without a record: %q, %v", out, err)
	}
	if out, err := RunHostClock(rec, []string{"offset"}); err != nil || out != "offset 0" {
		t.Errorf("offset: %q, %v", out, err)
	}
	if off, err := parseHostClockOffset("offset -1500000000\n"); err != nil || off != -1500*time.Millisecond {
		t.Errorf("parse: %v, %v", off, err)
	}
	for _, args := range [][]string{{"set"}, {"jump", "1s"}, {"set", "soon"}} {
		if _, err := RunHostClock(rec, args); err == nil {
			t.Errorf("%v was taken", args)
		}
	}
}

// Hosts on their own kernels pass; a host on this machine's kernel, or two hosts on one, are
// refused saying why and how to allow it.
func TestSharedKernelsRefused(t *testing.T) {
	m := func(name, boot string) *sshMachine { return &sshMachine{name: name, bootID: boot} }
	if err := sharedKernels("local", []*sshMachine{m("n1", "a"), m("n2", "b")}); err != nil {
		t.Errorf("own kernels: %v", err)
	}
	for _, ms := range [][]*sshMachine{{m("n1", "a"), m("n2", "local")}, {m("n1", "a"), m("n2", "a")}} {
		err := sharedKernels("local", ms)
		if err == nil || !strings.Contains(err.Error(), "--allow-host-clock=shared") || !strings.Contains(err.Error(), "boot_id") {
			t.Errorf("%s, %s: %v", ms[0].bootID, ms[1].bootID, err)
		}
	}
}

// A survey's record lines are host clocks to restore, and say so.
func TestLeftoversNameHostClocks(t *testing.T) {
	l := SSHLeftovers{Host: "n1", Clocks: []string{"/x/run/" + HostClockRecordName}}
	if l.Count() != 1 || !strings.Contains(l.String(), "1 host clocks (/x/run/hostclock.json)") {
		t.Errorf("%d: %s", l.Count(), l)
	}
	if s := restoreClockScript("/x/run"); !strings.Contains(s, "/x/run/lockpick internal hostclock --record /x/run/hostclock.json restore") {
		t.Errorf("restore script: %s", s)
	}
}
