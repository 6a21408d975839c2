package systems

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// roleBoard is a family's table of roles and the watchers told of each change: what a role watch
// does the same whether the roles come from a leader election (leaderWatch) or from each server's
// own answer (pgRoles).
type roleBoard struct {
	family string
	log    *slog.Logger

	mu    sync.Mutex
	roles map[string]Role
	subs  []func(Event)
}

func newRoleBoard(family string, nodes []Node, log *slog.Logger) roleBoard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return roleBoard{family: family, log: log, roles: StaticRoles(nodes).Roles()}
}

// change runs f on the roles under the board's lock; f changes them in place and returns the ones
// it changed, which the board then announces to every watcher, outside the lock.
func (b *roleBoard) change(f func(roles map[string]Role) map[string]Role) {
	b.mu.Lock()
	changed := f(b.roles)
	subs := slices.Clone(b.subs)
	b.mu.Unlock()
	if len(changed) == 0 {
		return
	}
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(changed)) {
		parts = append(parts, fmt.Sprintf("%s is %s", n, changed[n]))
	}
	e := Event{Time: time.Now(), Kind: KindRoles, Text: strings.Join(parts, ", "), Roles: changed}
	b.log.Debug(b.family+" roles", "changed", e.Text)
	for _, f := range subs {
		f(e)
	}
}

func (b *roleBoard) current() map[string]Role {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.roles)
}

func (b *roleBoard) subscribe(f func(Event)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs = append(b.subs, f)
}

// tickUntilDone runs f every interval until ctx is done: a role watch's rounds after its first.
func tickUntilDone(ctx context.Context, every time.Duration, f func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}
