package systems

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockpick-dev/lockpick/clusters"
)

// holdWrites pauses client writes on the redis node at addr (CLIENT PAUSE WRITE, bounded by max so
// that a stalled harness does not hold them forever), runs f, and lets the writes go. Reads go on
// meanwhile, so f can look at the node's keys; writes that arrive wait and run after.
func holdWrites(ctx context.Context, addr string, max time.Duration, f func(context.Context) error) error {
	admin := clusters.AdminClient(addr)
	defer admin.Close()
	pctx, cancel := context.WithTimeout(ctx, max)
	defer cancel()
	if err := admin.Do(pctx, "CLIENT", "PAUSE", max.Milliseconds(), "WRITE").Err(); err != nil {
		return fmt.Errorf("hold writes on %s: %w", addr, err)
	}
	defer admin.Do(context.WithoutCancel(pctx), "CLIENT", "UNPAUSE")
	return f(pctx)
}

// errStopped is returned by waits cut short by the system closing.
var errStopped = errors.New("system stopped")

// RedisNodes names redis nodes by their own addresses and holds writes on them (HoldWrites), for
// callers that run redis nodes outside a System.
type RedisNodes map[string]string

// HoldWrites holds back client writes on node while f runs, as System.HoldWrites does.
func (r RedisNodes) HoldWrites(ctx context.Context, node string, max time.Duration, f func(context.Context) error) error {
	addr, ok := r[node]
	if !ok {
		return fmt.Errorf("no node %q", node)
	}
	return holdWrites(ctx, addr, max, f)
}
