package systems

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// watcher follows the sentinels: it passes on everything they announce, and keeps the system's
// view of the roles, which it takes from the sentinel reporting the highest configuration epoch
// (each failover bumps it, so the highest is the newest decision). It reads the sentinels over
// their own addresses, bypassing the links: a fault on a path must not blind the harness.
type watcher struct {
	sys *sentinelSys
	log *slog.Logger

	mu      sync.Mutex
	primary string
	epoch   int64
	before  string // the primary the failover of epoch replaced
	subs    []func(Event)

	clients map[string]*redis.SentinelClient // sentinel -> its own address, for the role queries
	queue   chan Event
	refresh chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// refreshEvery bounds how stale the role view can get if an announcement is missed (a sentinel's
// connection broke when the announcement was sent).
const refreshEvery = 250 * time.Millisecond

func newWatcher(s *sentinelSys, log *slog.Logger) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{sys: s, log: log, primary: s.nodes[0].Name, clients: map[string]*redis.SentinelClient{},
		queue: make(chan Event, 4096), refresh: make(chan struct{}, 1), cancel: cancel}
	for _, n := range s.nodes {
		if n.Role == RoleSentinel {
			w.clients[n.Name] = sentinelClient(n.Addr)
		}
	}
	w.update(ctx)
	w.wg.Go(func() { w.dispatch(ctx) })
	w.wg.Go(func() { w.refreshLoop(ctx) })
	for _, n := range s.nodes {
		if n.Role == RoleSentinel {
			w.wg.Go(func() { w.listen(ctx, n) })
		}
	}
	return w
}

func (w *watcher) subscribe(f func(Event)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs = append(w.subs, f)
}

func (w *watcher) emit(e Event) {
	select {
	case w.queue <- e:
	default:
		w.log.Warn("system events: queue full, event dropped", "kind", e.Kind, "text", e.Text)
	}
}

func (w *watcher) dispatch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-w.queue:
			w.mu.Lock()
			subs := slices.Clone(w.subs)
			w.mu.Unlock()
			for _, f := range subs {
				f(e)
			}
		}
	}
}

// listen passes on every announcement of one sentinel. go-redis resubscribes by itself after the
// sentinel restarts.
func (w *watcher) listen(ctx context.Context, n Node) {
	rc := redis.NewClient(&redis.Options{Addr: n.Addr, Protocol: 2, DisableIdentity: true})
	defer rc.Close()
	ps := rc.PSubscribe(ctx, "*")
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			w.emit(Event{Time: time.Now(), From: n.Name, Kind: msg.Channel, Text: w.names(msg.Payload)})
			if changesRoles(msg.Channel) {
				select {
				case w.refresh <- struct{}{}:
				default:
				}
			}
		}
	}
}

// changesRoles reports whether an announcement may follow a change of the primary.
func changesRoles(kind string) bool {
	switch kind {
	case "+switch-master", "+promoted-slave", "+failover-end", "+config-update-from", "+convert-to-slave":
		return true
	}
	return false
}

func (w *watcher) refreshLoop(ctx context.Context) {
	t := time.NewTicker(refreshEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.refresh:
		}
		w.update(ctx)
	}
}

// update asks every sentinel for the master it monitors and adopts the answer with the highest
// configuration epoch; a new primary is announced as a KindRoles event.
func (w *watcher) update(ctx context.Context) {
	type answer struct {
		node  string
		epoch int64
	}
	byFrom := map[string]answer{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, sc := range w.clients {
		wg.Go(func() {
			qctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			m, err := sc.Master(qctx, MasterName).Result()
			if err != nil {
				return
			}
			epoch, _ := strconv.ParseInt(m["config-epoch"], 10, 64)
			mu.Lock()
			byFrom[name] = answer{w.sys.nodeAt(m["ip"], m["port"]), epoch}
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(byFrom) == 0 {
		return
	}
	w.mu.Lock()
	old := w.primary
	for _, a := range byFrom {
		if a.epoch > w.epoch {
			// A newer failover: the primary so far is the one it replaces.
			w.epoch, w.before = a.epoch, w.primary
		}
	}
	// Within one epoch the leader reports the new epoch with the old address for a moment, so an
	// answer naming another node than the replaced one is the newer; and the view never goes back
	// to the replaced node within the epoch, whatever a slow sentinel still says.
	var from []string
	next := w.primary
	for _, s := range slices.Sorted(maps.Keys(byFrom)) {
		a := byFrom[s]
		if a.epoch == w.epoch && a.node != w.before && (next == w.before || next == a.node) {
			next = a.node
			from = append(from, s)
		}
	}
	w.primary = next
	epoch := w.epoch
	w.mu.Unlock()
	if next != old {
		w.emit(Event{
			Time: time.Now(), Kind: KindRoles,
			Text:  fmt.Sprintf("%s primary, %s replica (configuration epoch %d, as %s report)", next, old, epoch, strings.Join(from, ", ")),
			Roles: map[string]Role{next: RolePrimary, old: RoleReplica},
		})
	}
}

// roles is the current view: the primary, every other data node a replica, the sentinels.
func (w *watcher) roles() map[string]Role {
	w.mu.Lock()
	primary := w.primary
	w.mu.Unlock()
	out := map[string]Role{}
	for _, n := range w.sys.nodes {
		switch {
		case n.Role == RoleSentinel:
			out[n.Name] = RoleSentinel
		case n.Name == primary:
			out[n.Name] = RolePrimary
		default:
			out[n.Name] = RoleReplica
		}
	}
	return out
}

// names replaces the addresses in a sentinel's announcement ("slave 127.0.0.1:40002 127.0.0.1
// 40002 @ lockpick 127.0.0.1 40001") by the nodes' names.
func (w *watcher) names(payload string) string {
	f := strings.Fields(payload)
	var out []string
	for i := 0; i < len(f); i++ {
		if i+1 < len(f) && net.ParseIP(f[i]) != nil {
			if _, err := strconv.Atoi(f[i+1]); err == nil {
				out = append(out, w.sys.nodeAt(f[i], f[i+1]))
				i++
				continue
			}
		}
		if host, port, err := net.SplitHostPort(f[i]); err == nil {
			out = append(out, w.sys.nodeAt(host, port))
			continue
		}
		out = append(out, f[i])
	}
	return strings.Join(out, " ")
}

func (w *watcher) close() {
	w.cancel()
	w.wg.Wait()
	for _, sc := range w.clients {
		sc.Close()
	}
}

// sentinelClient opens a harness connection to a sentinel: no retries, one dial, the caller's
// deadline bounds every read.
func sentinelClient(addr string) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true})
}

// sentinelMaster is a sentinel's SENTINEL MASTER answer about the monitored master.
func sentinelMaster(ctx context.Context, addr string) (map[string]string, error) {
	sc := sentinelClient(addr)
	defer sc.Close()
	return sc.Master(ctx, MasterName).Result()
}
