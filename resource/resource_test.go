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
			var value, highest int64
			for i, w := range writes {
				if got := guard.Accepts(value, highest, w.read, w.token); got != w.accepted {
					t.Fatalf("write %d: model says accepted=%v, want %v", i, got, w.accepted)
				}
				err := s.Write(ctx, "k", w.value, w.token, w.read)
				if w.accepted && err != nil || !w.accepted && !errors.Is(err, ErrRejected) {
					t.Fatalf("write %d (%+v): got %v", i, w, err)
				}
				if w.accepted {
					value = w.value
					if guard == GuardFencing {
						highest = w.token
					}
				}
				v, err := s.Read(ctx, "k")
				if err != nil || v != value {
					t.Fatalf("after write %d: read %d (%v), want %d", i, v, err, value)
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
