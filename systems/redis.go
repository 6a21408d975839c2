package systems

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// holdWrites pauses client writes on the redis node at addr (CLIENT PAUSE WRITE, bounded by max so
// that a stalled harness does not hold them forever), runs f, and lets the writes go. Reads go on
// meanwhile, so f can look at the node's keys; writes that arrive wait and run after.
func holdWrites(ctx context.Context, addr string, max time.Duration, f func(context.Context) error) error {
	admin := AdminClient(addr)
	defer admin.Close()
	return holdWritesStepping(ctx, admin, addr, max, withoutSteps(f))
}

// withoutSteps is a hold's f that never steps it.
func withoutSteps(f func(context.Context) error) func(context.Context, func(context.Context) error) error {
	return func(ctx context.Context, _ func(context.Context) error) error { return f(ctx) }
}

// holdClients keeps an admin client per address for holds, its connection open between them: a
// hold taken as a release is invoked must not wait for a dial.
type holdClients struct {
	mu      sync.Mutex
	clients map[string]*redis.Client
}

// get returns the client for addr.
func (h *holdClients) get(addr string) *redis.Client {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.clients == nil {
		h.clients = map[string]*redis.Client{}
	}
	c := h.clients[addr]
	if c == nil {
		c = AdminClient(addr)
		h.clients[addr] = c
	}
	return c
}

// close closes every client.
func (h *holdClients) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.clients {
		c.Close()
	}
	h.clients = nil
}

// holdWritesStepping is holdWrites, through admin, whose f may also step the hold: let the writes held back so far
// run (CLIENT UNPAUSE: the node runs them before it answers) and hold again what arrives after, all
// within max. Replication goes on throughout: a pause holds clients' writes, not the replicas' stream.
func holdWritesStepping(ctx context.Context, admin *redis.Client, addr string, max time.Duration, f func(ctx context.Context, step func(context.Context) error) error) error {
	pctx, cancel := context.WithTimeout(ctx, max)
	defer cancel()
	end := time.Now().Add(max)
	pause := func(ctx context.Context) error {
		left := time.Until(end).Milliseconds()
		if left < 1 {
			return fmt.Errorf("hold writes on %s: its %v are over", addr, max)
		}
		if err := admin.Do(ctx, "CLIENT", "PAUSE", left, "WRITE").Err(); err != nil {
			return fmt.Errorf("hold writes on %s: %w", addr, err)
		}
		return nil
	}
	if err := pause(pctx); err != nil {
		return err
	}
	defer admin.Do(context.WithoutCancel(pctx), "CLIENT", "UNPAUSE")
	step := func(ctx context.Context) error {
		if err := admin.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
			return fmt.Errorf("let the held writes on %s run: %w", addr, err)
		}
		return pause(ctx)
	}
	return f(pctx, step)
}

// errStopped is returned by waits cut short by the system closing.
var errStopped = errors.New("system stopped")

// RedisNodes names redis nodes by their own addresses and holds writes on them (HoldWrites), for
// callers that run redis nodes outside a System.
type RedisNodes map[string]string

// HoldWrites holds back client writes on node while f runs, as System.HoldWrites does.
func (r RedisNodes) HoldWrites(ctx context.Context, node string, max time.Duration, f func(context.Context) error) error {
	return r.HoldWritesStepping(ctx, node, max, withoutSteps(f))
}

// HoldWritesStepping holds back client writes on node while f runs, and lets f step the hold, as
// holdWritesStepping does.
func (r RedisNodes) HoldWritesStepping(ctx context.Context, node string, max time.Duration, f func(ctx context.Context, step func(context.Context) error) error) error {
	addr, ok := r[node]
	if !ok {
		return fmt.Errorf("no node %q", node)
	}
	admin := AdminClient(addr)
	defer admin.Close()
	return holdWritesStepping(ctx, admin, addr, max, f)
}

// Persistence is how a node keeps its data across a restart.
type Persistence string

// Persistence settings.
const (
	// PersistNone keeps nothing: a restarted node comes back empty.
	PersistNone Persistence = "none"
	// PersistAOFEverysec appends every write and fsyncs once a second.
	PersistAOFEverysec Persistence = "aof-everysec"
	// PersistAOFAlways appends and fsyncs every write before replying.
	PersistAOFAlways Persistence = "aof-always"
)

// ParsePersistence checks a persistence name.
func ParsePersistence(s string) (Persistence, error) {
	switch p := Persistence(s); p {
	case PersistNone, PersistAOFEverysec, PersistAOFAlways:
		return p, nil
	}
	return "", fmt.Errorf("unknown persistence %q: use none, aof-everysec or aof-always", s)
}

// ErrRedisMissing means no redis-server binary could be found.
var ErrRedisMissing = errors.New("redis-server not found: install it with `apt-get install redis-server` (or set --redis-server to its path)")

// AdminClient opens a client to addr that never retries a command and dials once, so the harness
// sees a dead node at once instead of through go-redis's back-off.
func AdminClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialerRetries: 1, PoolSize: 2, DisableIdentity: true, Protocol: 2,
		ContextTimeoutEnabled: true, // a caller's deadline bounds reads too, as readiness polls need
	})
}

// FindRedisServer resolves the redis-server binary to an absolute path, or returns ErrRedisMissing.
func FindRedisServer(path string) (string, error) {
	if path == "" {
		path = "redis-server"
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", ErrRedisMissing
	}
	// Absolute, but not through EvalSymlinks: Redis picks its mode from argv[0], and Debian's
	// redis-server is a symlink to redis-check-rdb.
	return filepath.Abs(p)
}

// RedisArgs is the command line of a redis-server node listening on bind:port, with dir as its
// working directory (an absolute path: its data and its log live there) and persistence p.
func RedisArgs(bind string, port int, dir string, p Persistence) []string {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", bind,
		"--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"),
		"--daemonize", "no",
		"--protected-mode", "no",
		"--save", "",
		"--appendfilename", "appendonly.aof",
	}
	switch p {
	case PersistNone:
		args = append(args, "--appendonly", "no")
	case PersistAOFEverysec:
		args = append(args, "--appendonly", "yes", "--appendfsync", "everysec")
	case PersistAOFAlways:
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	return args
}

// PingOnce asks addr for PONG on a fresh connection. A fresh client each time: a go-redis pool that
// saw a refused dial backs off for a second, which would add that second to every restart.
func PingOnce(ctx context.Context, addr string) error {
	rc := AdminClient(addr)
	defer rc.Close()
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	return rc.Ping(pctx).Err()
}

// MeasureClockOffset is how far the clock of the Redis server at addr is from the harness's: its
// TIME against the midpoint of the shortest of three round trips. Its error is about half that
// round trip at most (microseconds here).
func MeasureClockOffset(addr string) (time.Duration, error) {
	rc := AdminClient(addr)
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// Connect first, so the round trip measured is one command, not a dial.
	if err := rc.Ping(ctx).Err(); err != nil {
		return 0, err
	}
	var best, rtt time.Duration = 0, -1
	for range 3 {
		before := time.Now()
		t, err := rc.Time(ctx).Result()
		after := time.Now()
		if err != nil {
			return 0, err
		}
		if d := after.Sub(before); rtt < 0 || d < rtt {
			rtt, best = d, t.Sub(before.Add(d/2))
		}
	}
	return best, nil
}
