package resource

import (
	"context"
	"errors"
	"testing"

	"github.com/lockpick-dev/lockpick/systems"
)

func open(t *testing.T, guard Guard) *Store {
	t.Helper()
	c, err := systems.StartLocal(context.Background(), systems.LocalConfig{Nodes: 1, NamePrefix: "r", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if c.Nodes()[0].Name != "r1" {
		t.Errorf("resource node is called %s, want r1", c.Nodes()[0].Name)
	}
	s, err := Open(c.Nodes()[0].Addr(), guard, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Each guard's script against a real redis-server, write by write, beside the rule the checker's
// model uses: the two must agree.
func TestGuards(t *testing.T) {
	type write struct {
		value, token, read int64
		accepted           bool
	}
	cases := map[Guard][]write{
		GuardNone:     {{1, 0, 0, true}, {1, 0, 0, true}, {5, 0, 3, true}},
		GuardFencing:  {{1, 3, 0, true}, {2, 2, 1, false}, {2, 3, 1, false}, {2, 4, 1, true}},
		GuardCheckSet: {{1, 0, 0, true}, {1, 0, 0, false}, {2, 0, 1, true}, {9, 0, 7, false}},
	}
	ctx := context.Background()
	for guard, writes := range cases {
		t.Run(string(guard), func(t *testing.T) {
			s := open(t, guard)
			var st State
			for i, w := range writes {
				if got := guard.Accepts(st, w.read, w.token); got != w.accepted {
					t.Fatalf("write %d: model says accepted=%v, want %v", i, got, w.accepted)
				}
				err := s.Write(ctx, "k", w.value, w.token, w.read)
				if w.accepted && err != nil || !w.accepted && !errors.Is(err, ErrRejected) {
					t.Fatalf("write %d (%+v): got %v", i, w, err)
				}
				if w.accepted {
					st.Value = w.value
					if guard == GuardFencing {
						st.Highest = w.token
					}
				}
				v, err := s.Read(ctx, "k", 0)
				if err != nil || v != st.Value {
					t.Fatalf("after write %d: read %d (%v), want %d", i, v, err, st.Value)
				}
			}
		})
	}
}

func TestParseGuard(t *testing.T) {
	if _, err := ParseGuard("fence"); err == nil || err.Error() != `unknown guard "fence": use one of none, fencing, check-and-set` {
		t.Errorf("got %v", err)
	}
	if g, err := ParseGuard("check-and-set"); err != nil || g != GuardCheckSet {
		t.Errorf("got %v %v", g, err)
	}
}

// A fencing read registers the reader's token: a paused holder's stale write that lands between
// the next holder's read and its write is refused, and the next holder's own write still passes
// (Kleppmann's case in a read-modify-write). The model agrees at every step.
func TestFencingReadRegistersItsToken(t *testing.T) {
	ctx := context.Background()
	s := open(t, GuardFencing)
	var st State
	step := func(what string, token, read int64, want bool) {
		t.Helper()
		if got := GuardFencing.Accepts(st, read, token); got != want {
			t.Fatalf("%s: model says accepted=%v, want %v", what, got, want)
		}
		err := s.Write(ctx, "k", read+1, token, read)
		if want && err != nil || !want && !errors.Is(err, ErrRejected) {
			t.Fatalf("%s: got %v", what, err)
		}
		if want {
			st.Value, st.Highest = read+1, token
		}
	}
	read := func(token int64) int64 {
		t.Helper()
		v, err := s.Read(ctx, "k", token)
		if err != nil || v != st.Value {
			t.Fatalf("read with token %d: %d (%v), want %d", token, v, err, st.Value)
		}
		if GuardFencing.Registers(token) {
			st.Seen = max(st.Seen, token)
		}
		return v
	}
	step("first holder", 365, read(365), true)
	stale := read(365) // the holder reads, then pauses
	next := read(399)  // the next holder reads
	step("the paused holder's write after the next holder's read", 365, stale, false)
	step("the next holder's write", 399, next, true)
	read(0) // a read without a token registers nothing
	v := read(420)
	read(450) // a token only read, never written
	step("a write above every accepted token but below one read", 420, v, false)
	step("the reader's own write", 450, read(450), true)
}
