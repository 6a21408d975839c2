package locks

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/systems"
)

// badClient starts testdata/badclient.py in mode through the driver.
func badClient(t *testing.T, mode string) (*external, error) {
	t.Helper()
	o := Options{Process: 7, TTL: time.Second, KeyPrefix: "lockpick:", ClientDir: t.TempDir(), ClientInitTimeout: 3 * time.Second}
	nodes := []Endpoint{{Node: "n1", Role: "master", Addr: "127.0.0.1:1"}}
	return startExternal([]string{"/usr/bin/python3", "testdata/badclient.py", mode}, nodes, o)
}

// gone reports whether process pid has been reaped (or never existed).
func gone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }

func acquireWithin(e *external, d time.Duration) (*Lease, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return e.Acquire(ctx, "lockpick:0", time.Second)
}

// A program that cannot even answer init is a one-line error that names it and quotes its stderr,
// and leaves no process behind.
func TestClientInitFailures(t *testing.T) {
	for mode, want := range map[string]string{
		"exit-at-once": "cannot connect to anything",
		"garbage":      "not a protocol message",
		"hang-init":    "did not answer init within 3s; its stderr ends: thinking",
		"partial-exit": "", // either its exit or its unfinished line, whichever the driver sees first
	} {
		t.Run(mode, func(t *testing.T) {
			e, err := badClient(t, mode)
			if err == nil {
				e.Close()
				t.Fatal("init succeeded")
			}
			msg := err.Error()
			if want == "" && !strings.Contains(msg, "exited (exit status 0)") && !strings.Contains(msg, "the last line has no newline") {
				t.Fatalf("error %q: want its exit or its unfinished line", msg)
			}
			if !strings.Contains(msg, want) || !strings.Contains(msg, "client p7 (python3 badclient.py "+mode+")") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line naming the client and containing %q", msg, want)
			}
		})
	}
}

// Replies that break the protocol never become a lease: the acquire is unknown and the program is
// broken, so the run stops rather than guess.
func TestClientBrokenReplies(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	for _, mode := range []string{"unknown-id", "twice", "no-value", "negative-validity", "validity-missing", "huge-line", "unknown-field", "wrong-type", "close-stdout", "string-id", "depth", "token", "other-key", "empty-line", "huge-validity"} {
		t.Run(mode, func(t *testing.T) {
			e, err := badClient(t, mode)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			l, err := acquireWithin(e, 3*time.Second)
			if mode == "twice" && err == nil {
				// The first reply was well formed and is the lease; the second breaks the program.
				time.Sleep(200 * time.Millisecond)
				_, err = acquireWithin(e, time.Second)
				l = nil
			}
			if l != nil {
				t.Fatalf("got a lease %+v from a broken client", l)
			}
			if !IsBrokenClient(err) || !IsIndeterminate(err) {
				t.Fatalf("error %v: want a broken client, indeterminate", err)
			}
			if e.Broken() == nil || strings.Contains(e.Broken().Error(), "\n") {
				t.Fatalf("Broken() = %v, want one line", e.Broken())
			}
		})
	}
}

// A program that exits by itself after its init_ok died: the request in flight is unknown, the
// program is not broken (the run goes on), and its death says how it ended and quotes its stderr,
// also to a watcher that registers after it.
func TestClientDeathIsNotBroken(t *testing.T) {
	e, err := badClient(t, "exit-mid-run")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	deaths := make(chan Death, 2)
	e.OnDeath(func(d Death) { deaths <- d })
	l, err := acquireWithin(e, 3*time.Second)
	if l != nil || !IsIndeterminate(err) || IsBrokenClient(err) || !errors.Is(err, ErrCrashed) {
		t.Fatalf("lease %v, error %v: want an unknown outcome, the client crashed, not broken", l, err)
	}
	d := <-deaths
	if d.Process != 7 || d.Exit != "exit status 0" || !strings.Contains(d.Stderr, "p7.log") {
		t.Fatalf("death %+v: want p7, exit status 0 and its log", d)
	}
	if e.Broken() != nil || e.Died() == nil {
		t.Fatalf("broken %v, died %v: want died, not broken", e.Broken(), e.Died())
	}
	late := make(chan Death, 1)
	e.OnDeath(func(d Death) { late <- d })
	if got := <-late; got != d {
		t.Fatalf("a late watcher got %+v, want %+v", got, d)
	}
	if _, err := acquireWithin(e, time.Second); !IsIndeterminate(err) || IsBrokenClient(err) {
		t.Fatalf("a request to the dead program: %v; want unknown, not broken", err)
	}
	if lib := e.Library(); lib.Name != "bad" || lib.Version != "0" {
		t.Fatalf("library %+v: want what init_ok said", lib)
	}
}

// An event about a lease the program never held breaks it.
func TestClientForeignEvent(t *testing.T) {
	e, err := badClient(t, "foreign-event")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var got []LeaseEvent
	e.Notify(func(ev LeaseEvent) { got = append(got, ev) })
	_, err = acquireWithin(e, 3*time.Second)
	if !IsBrokenClient(err) || len(got) != 0 {
		t.Fatalf("error %v, events %v: want broken, no event", err, got)
	}
}

// An event right after the grant it names is the lease's news, not a stranger's.
func TestClientEventAfterGrant(t *testing.T) {
	e, err := badClient(t, "renew-at-once")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got := make(chan LeaseEvent, 1)
	e.Notify(func(ev LeaseEvent) { got <- ev })
	for range 20 {
		if _, err := acquireWithin(e, 3*time.Second); err != nil {
			t.Fatal(err)
		}
		if ev := <-got; ev.Lost || ev.Deadline.IsZero() {
			t.Fatalf("event %+v, want a renewal with a deadline", ev)
		}
	}
}

// A reply that comes after the driver stopped waiting changes nothing: the acquire stays unknown,
// the late ok is no lease, and the program is not broken for it.
func TestClientLateReply(t *testing.T) {
	e, err := badClient(t, "late")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := acquireWithin(e, 200*time.Millisecond)
	if l != nil || !IsIndeterminate(err) || IsBrokenClient(err) {
		t.Fatalf("lease %v, error %v: want an unknown outcome", l, err)
	}
	time.Sleep(700 * time.Millisecond)
	if e.Broken() != nil {
		t.Fatalf("broken by a late reply: %v", e.Broken())
	}
	l, err = acquireWithin(e, 3*time.Second)
	if err != nil || l.Value != "v2" {
		t.Fatalf("next acquire: %v, %v; want the lease v2 (never the late v1)", l, err)
	}
}

// A good program's lease counts its TTL from the request's send when it promises no validity; a
// crash kills its whole process group (a helper it started too), and Close reaps it.
func TestClientLifecycle(t *testing.T) {
	e, err := badClient(t, "child")
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	l, err := acquireWithin(e, 3*time.Second)
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if l.Deadline.Before(before.Add(time.Second)) || l.Deadline.After(after.Add(time.Second)) {
		t.Fatalf("deadline %v not a TTL after the send (in [%v, %v])", l.Deadline, before.Add(time.Second), after.Add(time.Second))
	}
	if err := e.Pause(); err != nil {
		t.Fatal(err)
	}
	_, err = acquireWithin(e, 300*time.Millisecond)
	if !IsIndeterminate(err) || IsBrokenClient(err) {
		t.Fatalf("acquire of a stopped program: %v, want unknown", err)
	}
	if err := e.Resume(); err != nil {
		t.Fatal(err)
	}
	pid := e.cmd.Process.Pid
	child := childPid(t, pid)
	e.Crash()
	e.Close()
	if !gone(pid) {
		t.Fatalf("program %d still there after Close", pid)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !gone(child) || zombie(child) {
		if time.Now().After(deadline) {
			t.Fatalf("the program's helper %d outlived it", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := e.Broken(); err != nil {
		t.Fatalf("a crash the harness made broke the program: %v", err)
	}
}

// childPid finds the helper of the "child" mode: the process whose parent is the program.
func childPid(t *testing.T, parent int) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		rest := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(rest) > 1 && rest[1] == strconv.Itoa(parent) {
			pid, _ := strconv.Atoi(d.Name())
			return pid
		}
	}
	t.Fatal("no helper process found")
	return 0
}

// zombie reports whether pid is a zombie (dead, waiting for a parent that init will reap).
func zombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	return strings.HasPrefix(s[strings.LastIndexByte(s, ')')+2:], "Z")
}

// The clock shim loaded into a client program moves Python's time.time() and PHP's microtime().
func TestClientClockShim(t *testing.T) {
	shim, err := systems.BuildClockShim(context.Background(), t.TempDir())
	if err != nil {
		t.Skipf("no clock shim: %v", err)
	}
	for name, cmd := range map[string][]string{
		"python": {"/usr/bin/python3", "testdata/badclient.py", "clock"},
		"php":    {"php", "testdata/clock.php"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := exec.LookPath(cmd[0]); err != nil {
				t.Skipf("%s not installed (make deps)", cmd[0])
			}
			o := Options{Process: 1, TTL: time.Second, ClientDir: t.TempDir(), ClockShim: shim}
			e, err := startExternal(cmd, []Endpoint{{Node: "n1", Addr: "127.0.0.1:1"}}, o)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			for _, offset := range []time.Duration{0, time.Hour, -90 * time.Second} {
				if err := e.ShiftClock(offset); err != nil {
					t.Fatal(err)
				}
				l, err := acquireWithin(e, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				secs, _ := strconv.ParseFloat(l.Value, 64)
				got := time.Until(time.UnixMicro(int64(secs * 1e6))) // the client's clock less the real time
				if d := got - offset; d < -2*time.Second || d > 2*time.Second {
					t.Fatalf("offset %v: the client's clock is %v from the real time", offset, got)
				}
			}
		})
	}
}

// The shipped clients, against real Redis nodes through their libraries: one holder at a time, the
// lease named by the library's value, released for the next.
func TestShippedClients(t *testing.T) {
	t.Parallel() // mostly waits on its own servers: runs beside the others (issue 28)
	for _, name := range []string{"py-redis", "py-tooz", "php-malkusch"} {
		t.Run(name, func(t *testing.T) {
			k, _ := Lookup(name)
			_, eps, _ := cluster(t, k.Nodes)
			dir := t.TempDir()
			opts := func(p int) Options {
				return Options{Process: p, TTL: 2 * time.Second, KeyPrefix: "lockpick:", ClientDir: dir, NodeTimeout: time.Second}
			}
			a, err := Build(k, eps, opts(1))
			if err != nil {
				t.Skipf("%s cannot start here (make deps installs its packages): %v", name, err)
			}
			defer a.Close()
			b, err := Build(k, eps, opts(2))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			ctx := context.Background()
			la, err := a.Acquire(ctx, "lockpick:0", 2*time.Second)
			if err != nil || la.Value == "" {
				t.Fatalf("acquire: %v, %v", la, err)
			}
			if k.Open != la.Deadline.IsZero() {
				t.Fatalf("deadline %v for a lock whose leases are open: %v", la.Deadline, k.Open)
			}
			if err := a.Release(ctx, la); err != nil {
				t.Fatal(err)
			}
			lb, err := b.Acquire(ctx, "lockpick:0", 2*time.Second)
			if err != nil || lb.Value == la.Value {
				t.Fatalf("acquire after the release: %v, %v", lb, err)
			}
			// Refused after the library's own wait (half the TTL; malkusch's timeout), definitely.
			if _, err := a.Acquire(ctx, "lockpick:0", 2*time.Second); !IsHeld(err) {
				t.Fatalf("acquire of a held key: %v, want held", err)
			}
		})
	}
}
