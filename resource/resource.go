// Package resource is the data a lock protects in the counter workload: a counter per lock key on a
// redis-server of its own, written through a guard.
//
// Each counter is a hash {value, token}. The guards are Lua scripts, so the check and the write are
// one atomic step on the resource node:
//
//   - none: the write sets the value, whatever happened since the read.
//   - fencing: Kleppmann's fencing check, as a storage service that fences does it: every request
//     carries the holder's token; a read registers its token (the highest read is "seen" in the
//     hash), and a write is accepted only if its token is higher than every token accepted before
//     ("token") and not below any token a read registered. Checking writes alone is not enough for
//     a read-modify-write: a paused holder's stale write landing between the next holder's read and
//     its write would be accepted, and the next holder's write, built on a value read before it,
//     would then overwrite it (a lost update under fencing).
//   - check-and-set: the write is accepted only if the value is still the one the process read, the
//     compare-and-set antirez points to; it needs no ordered tokens.
package resource

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Guard is how the resource checks a write.
type Guard string

// The guards.
const (
	GuardNone     Guard = "none"
	GuardFencing  Guard = "fencing"
	GuardCheckSet Guard = "check-and-set"
)

// Guards lists every guard.
func Guards() []Guard { return []Guard{GuardNone, GuardFencing, GuardCheckSet} }

// ParseGuard checks a guard name.
func ParseGuard(s string) (Guard, error) {
	for _, g := range Guards() {
		if string(g) == s {
			return g, nil
		}
	}
	names := make([]string, len(Guards()))
	for i, g := range Guards() {
		names[i] = string(g)
	}
	return "", fmt.Errorf("unknown guard %q: use one of %s", s, strings.Join(names, ", "))
}

// State is a counter as its guard sees it: its value, the highest token a write was accepted with,
// and the highest token a read registered (fencing).
type State struct{ Value, Highest, Seen int64 }

// Accepts is the guard's rule, for the checker's model: whether a write of a process that read
// read and holds token is accepted by a counter in state s.
func (g Guard) Accepts(s State, read, token int64) bool {
	switch g {
	case GuardFencing:
		return token > s.Highest && token >= s.Seen
	case GuardCheckSet:
		return s.Value == read
	}
	return true
}

// Registers reports whether a read with token changes the guard's state (the fencing guard's seen
// token).
func (g Guard) Registers(token int64) bool { return g == GuardFencing && token > 0 }

// ErrRejected means the guard rejected the write: it certainly had no effect.
var ErrRejected = errors.New("write rejected by the resource's guard")

// Scripts return 1 when the write was applied and 0 when the guard rejected it. KEYS[1] is the
// counter; ARGV is value, token, the value read.
var scripts = map[Guard]*redis.Script{
	GuardNone: redis.NewScript(`redis.call("hset", KEYS[1], "value", ARGV[1]) return 1`),
	GuardFencing: redis.NewScript(`local t = tonumber(redis.call("hget", KEYS[1], "token") or "0")
local s = tonumber(redis.call("hget", KEYS[1], "seen") or "0")
local w = tonumber(ARGV[2])
if w > t and w >= s then redis.call("hset", KEYS[1], "value", ARGV[1], "token", ARGV[2]) return 1 end
return 0`),
	GuardCheckSet: redis.NewScript(`local v = redis.call("hget", KEYS[1], "value") or "0"
if v == ARGV[3] then redis.call("hset", KEYS[1], "value", ARGV[1]) return 1 end
return 0`),
}

// fencedRead registers the reader's token (ARGV[1]) as seen when it is the highest yet, and returns
// the value.
var fencedRead = redis.NewScript(`local s = tonumber(redis.call("hget", KEYS[1], "seen") or "0")
if tonumber(ARGV[1]) > s then redis.call("hset", KEYS[1], "seen", ARGV[1]) end
return redis.call("hget", KEYS[1], "value") or "0"`)

// Store is a client of the resource node. It is safe for concurrent use.
type Store struct {
	client *redis.Client
	guard  Guard
}

// Open connects to the resource node at addr. Commands are never retried: a retried write after a
// timeout would have an ambiguous outcome, which the workload must record as such.
func Open(addr string, guard Guard, poolSize int) (*Store, error) {
	if _, ok := scripts[guard]; !ok {
		_, err := ParseGuard(string(guard))
		return nil, err
	}
	return &Store{guard: guard, client: redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialerRetries: 1, PoolSize: max(poolSize, 2),
		DisableIdentity: true, Protocol: 2, ContextTimeoutEnabled: true,
	})}, nil
}

// Guard is the store's guard.
func (s *Store) Guard() Guard { return s.guard }

// Read returns the counter's value; an absent counter is 0. token is the reader's fencing token,
// which the fencing guard registers (0: none). An error leaves unknown whether it was registered.
func (s *Store) Read(ctx context.Context, key string, token int64) (int64, error) {
	var v int64
	var err error
	if s.guard.Registers(token) {
		v, err = fencedRead.Run(ctx, s.client, []string{key}, token).Int64()
	} else {
		v, err = s.client.HGet(ctx, key, "value").Int64()
	}
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", key, err)
	}
	return v, nil
}

// Write writes value through the guard. token is the writer's fencing token, read the value it
// read. It returns ErrRejected when the guard refused the write; any other error leaves the outcome
// unknown.
func (s *Store) Write(ctx context.Context, key string, value, token, read int64) error {
	n, err := scripts[s.guard].Run(ctx, s.client, []string{key}, value, token, strconv.FormatInt(read, 10)).Int()
	if err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	if n == 0 {
		return ErrRejected
	}
	return nil
}

// Close closes the connections.
func (s *Store) Close() error { return s.client.Close() }
