// Package resource is the data a lock protects in the counter workload: a counter per lock key on a
// redis-server of its own, written through a guard.
//
// Each counter is a hash {value, token}. The guards are Lua scripts, so the check and the write are
// one atomic step on the resource node:
//
//   - none: the write sets the value, whatever happened since the read.
//   - fencing: the write is accepted only if its token is higher than every token accepted before
//     (the highest is stored in the hash), Kleppmann's fencing check.
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

// Accepts is the guard's rule, for the checker's model: whether a write of a process that read
// read and holds token is accepted by a resource whose value is value and highest token is highest.
func (g Guard) Accepts(value, highest, read, token int64) bool {
	switch g {
	case GuardFencing:
		return token > highest
	case GuardCheckSet:
		return value == read
	}
	return true
}

// ErrRejected means the guard rejected the write: it certainly had no effect.
var ErrRejected = errors.New("write rejected by the resource's guard")

// Scripts return 1 when the write was applied and 0 when the guard rejected it. KEYS[1] is the
// counter; ARGV is value, token, the value read.
var scripts = map[Guard]*redis.Script{
	GuardNone: redis.NewScript(`redis.call("hset", KEYS[1], "value", ARGV[1]) return 1`),
	GuardFencing: redis.NewScript(`local t = tonumber(redis.call("hget", KEYS[1], "token") or "0")
if tonumber(ARGV[2]) > t then redis.call("hset", KEYS[1], "value", ARGV[1], "token", ARGV[2]) return 1 end
return 0`),
	GuardCheckSet: redis.NewScript(`local v = redis.call("hget", KEYS[1], "value") or "0"
if v == ARGV[3] then redis.call("hset", KEYS[1], "value", ARGV[1]) return 1 end
return 0`),
}

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

// Read returns the counter's value; an absent counter is 0.
func (s *Store) Read(ctx context.Context, key string) (int64, error) {
	v, err := s.client.HGet(ctx, key, "value").Int64()
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
