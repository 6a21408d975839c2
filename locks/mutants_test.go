package locks

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// Mutants are buildable by name but offered nowhere: not in Names, which help and completion list.
func TestMutantsAreHidden(t *testing.T) {
	for _, m := range Mutants() {
		name := MutantPrefix + m.Name
		if slices.Contains(Names(), name) {
			t.Errorf("%s is listed in Names", name)
		}
		if err := Validate(name); err != nil {
			t.Errorf("Validate(%s): %v", name, err)
		}
		if Base(name) != m.Base || (m.Base != "single" && m.Base != "redlock") {
			t.Errorf("Base(%s) = %q, want %q", name, Base(name), m.Base)
		}
		l, err := New(name, []Endpoint{{Node: "n1", Addr: "127.0.0.1:1"}, {Node: "n2", Addr: "127.0.0.1:1"}, {Node: "n3", Addr: "127.0.0.1:1"}}, Options{})
		if err != nil {
			t.Fatalf("New(%s): %v", name, err)
		}
		l.Close()
	}
	if Base("redlock") != "redlock" {
		t.Error("Base of a built-in lock is not itself")
	}
}

// A renewal of a lease whose validity has ended is refused as lost, without a request: the lock
// no longer promises it, whatever the servers still hold.
func TestExtendRefusesAnEndedLease(t *testing.T) {
	nodes := []Endpoint{{Node: "n1", Addr: "127.0.0.1:1"}, {Node: "n2", Addr: "127.0.0.1:1"}, {Node: "n3", Addr: "127.0.0.1:1"}}
	for _, name := range []string{"single", "fenced", "redlock"} {
		l, err := New(name, nodes, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ended := &Lease{Key: "k", Value: "v", Deadline: time.Now().Add(-time.Millisecond)}
		if _, err := l.Extend(context.Background(), ended, time.Second); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("%s: extend of an ended lease: %v, want ErrLeaseLost", name, err)
		}
		// A live lease on an unreachable node is not "lost": nobody said so.
		live := &Lease{Key: "k", Value: "v", Deadline: time.Now().Add(time.Minute)}
		if _, err := l.Extend(context.Background(), live, time.Second); err == nil || errors.Is(err, ErrLeaseLost) {
			t.Errorf("%s: extend against unreachable nodes: %v, want an error other than ErrLeaseLost", name, err)
		}
		l.Close()
	}
}
