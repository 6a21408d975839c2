package locks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestNewValueIsUniqueBase32 checks that lease values keep crypto/rand.Text's form (26 characters
// of RFC 4648 base32) and do not repeat, and that every position draws on the whole alphabet: a
// position stuck on a few characters would mean fewer random bits than the 130 promised.
func TestNewValueIsUniqueBase32(t *testing.T) {
	const n = 200_000
	seen := make(map[string]bool, n)
	var used [26]map[byte]bool
	for i := range used {
		used[i] = map[byte]bool{}
	}
	for range n {
		v := newValue()
		if len(v) != 26 {
			t.Fatalf("value %q has %d characters, want 26", v, len(v))
		}
		for i := range len(v) {
			if !strings.ContainsRune(valueAlphabet, rune(v[i])) {
				t.Fatalf("value %q has %q, outside base32", v, v[i])
			}
			used[i][v[i]] = true
		}
		if seen[v] {
			t.Fatalf("value %q repeated within %d values", v, n)
		}
		seen[v] = true
	}
	for i, u := range used {
		if len(u) != len(valueAlphabet) {
			t.Errorf("position %d used %d of the %d characters in %d values", i, len(u), len(valueAlphabet), n)
		}
	}
}

func BenchmarkNewValue(b *testing.B) {
	for range b.N {
		_ = newValue()
	}
}

// TestIsIndeterminateFindsWrappedErrors holds IsIndeterminate to errors.As's answers: an
// indeterminate error found however deeply it is wrapped or joined, and nothing else.
func TestIsIndeterminateFindsWrappedErrors(t *testing.T) {
	ind := indeterminate(errors.New("read: i/o timeout"))
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{ErrHeld, false},
		{ind, true},
		{fmt.Errorf("acquire k0: %w", ind), true},
		{fmt.Errorf("redlock: %w", fmt.Errorf("node n2: %w", ind)), true},
		{errors.Join(ErrHeld, ind), true},
		{fmt.Errorf("not wrapped: %v", ind), false},
	} {
		if got := IsIndeterminate(c.err); got != c.want {
			t.Errorf("IsIndeterminate(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestUnsentOnlyBeforeTheRequestLeft holds unsent to its cases: a failed dial and a pool wait that
// ran out are unsent, however wrapped; a failed read or write, a timeout and no error are not. Every
// acquire asks it of a nil error, which must not allocate.
func TestUnsentOnlyBeforeTheRequestLeft(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	read := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{dial, true},
		{fmt.Errorf("SET NX on n1: %w", dial), true},
		{redis.ErrPoolTimeout, true},
		{fmt.Errorf("release on n1: %w", redis.ErrPoolTimeout), true},
		{read, false},
		{fmt.Errorf("SET NX on n1: %w", read), false},
		{context.DeadlineExceeded, false},
		{fmt.Errorf("not wrapped: %v", dial), false},
	} {
		if got := unsent(c.err); got != c.want {
			t.Errorf("unsent(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(1000, func() { unsent(nil) }); n != 0 {
		t.Errorf("unsent(nil) allocates %v times, want 0", n)
	}
}
