package checker

import (
	"container/heap"
	"fmt"
	"math/rand"
	"time"

	"github.com/lockpick-dev/lockpick/history"
)

// Generate simulates a contended mutex history that keeps mutual exclusion, for benchmarks and
// demos: ten client processes on keys "k0".."k<keys-1>" (one hot key when keys is 1) and a nemesis
// that kills and restarts nodes. It stops starting operations once ops operations (an invoke and
// its completion) have begun, so it returns about 2·ops events, in time order. The same seed gives
// the same history.
//
// Acquires mostly fail while the lock is held; an acquire succeeds only when invoked after the
// previous hold ended. A hold works and releases; now and then the holder stalls and its lease
// expires without a release, or its work overruns the deadline, and now and then an acquire times
// out (info), possibly leaving a lease nobody knows about, and its process id is retired.
func Generate(seed int64, ops int, keys int) []history.Event {
	const (
		clients = 10
		ttl     = 100 * time.Millisecond
	)
	keys = max(keys, 1)
	rng := rand.New(rand.NewSource(seed))
	between := func(lo, hi time.Duration) int64 { return int64(lo) + rng.Int63n(int64(hi-lo)+1) }
	keyNames := make([]string, keys)
	for i := range keyNames {
		keyNames[i] = fmt.Sprintf("k%d", i)
	}
	nodes := []string{"n1", "n2", "n3"}
	freeAt := make([]int64, keys) // when the current (or ghost) lease on each key ends
	tokens := make([]int64, keys)

	g := &genQueue{}
	procs := make([]*genProc, clients)
	for i := range procs {
		procs[i] = &genProc{slot: i, id: i, next: between(0, 2*time.Millisecond)}
		heap.Push(g, procs[i])
	}
	nemesis := &genProc{slot: clients, id: history.NemesisProcess, next: int64(500 * time.Millisecond)}
	heap.Push(g, nemesis)
	nextID := clients

	// Room for the operations, the few a process finishes after the limit, and the nemesis, so the
	// slice (hundreds of MiB for a million operations) is never copied to grow.
	out := make([]history.Event, 0, 2*ops+ops/50+1024)
	started := 0
	emit := func(e history.Event) {
		e.Index = int64(len(out))
		out = append(out, e)
	}
	for g.Len() > 0 {
		p := heap.Pop(g).(*genProc)
		if len(p.queue) > 0 {
			e := p.queue[0]
			p.queue = p.queue[1:]
			emit(e)
			if len(p.queue) > 0 {
				p.next = p.queue[0].Time
			} else {
				p.next = p.rest
			}
			heap.Push(g, p)
			continue
		}
		if started >= ops {
			continue // this process is done
		}
		t := p.next
		if p.id == history.NemesisProcess {
			// kill a node, restart it a while later, rest, repeat.
			node := []string{nodes[rng.Intn(len(nodes))]}
			killed := t + between(time.Millisecond, 20*time.Millisecond)
			start := killed + between(200*time.Millisecond, 1500*time.Millisecond)
			up := start + between(10*time.Millisecond, 50*time.Millisecond)
			p.queue = append(p.queue[:0],
				history.Event{Time: t, Type: history.Invoke, Process: -1, F: "kill", Fault: "restart", Effect: history.EffectFault, Nodes: node},
				history.Event{Time: killed, Type: history.Info, Process: -1, F: "kill", Fault: "restart", Effect: history.EffectFault, Nodes: node},
				history.Event{Time: start, Type: history.Invoke, Process: -1, F: "start", Fault: "restart", Effect: history.EffectHeal, Nodes: node},
				history.Event{Time: up, Type: history.Info, Process: -1, F: "start", Fault: "restart", Effect: history.EffectHeal, Nodes: node},
			)
			p.next = t
			heap.Push(g, p)
			// The nemesis's next round comes after this one; queue it lazily.
			nemesis.rest = up + between(500*time.Millisecond, 2*time.Second)
			continue
		}

		// A client starts an acquire at t; the lock decides at once.
		k := rng.Intn(keys)
		key := keyNames[k]
		lat := between(200*time.Microsecond, 2*time.Millisecond)
		started++
		inv := history.Event{Time: t, Type: history.Invoke, Process: p.id, F: history.FAcquire, Key: key}
		q := append(p.queue[:0], inv)
		roll := rng.Float64()
		switch {
		case roll < 0.005:
			// Timed out: the lock may have granted a lease nobody will release.
			done := t + int64(50*time.Millisecond)
			q = append(q, history.Event{Time: done, Type: history.Info, Process: p.id, F: history.FAcquire, Key: key, Error: "timeout"})
			if freeAt[k] < t && rng.Intn(2) == 0 {
				freeAt[k] = t + int64(ttl)
			}
			p.queue = q
			p.id = nextID // an indeterminate result retires the process id
			nextID++
			p.rest = done + between(time.Millisecond, 5*time.Millisecond)
		case freeAt[k] >= t:
			q = append(q, history.Event{Time: t + lat, Type: history.Fail, Process: p.id, F: history.FAcquire, Key: key, Error: "held", Reason: history.ReasonHeld})
			p.queue = q
			p.rest = t + lat + between(time.Millisecond, 5*time.Millisecond)
		default:
			tokens[k]++
			value := fmt.Sprintf("p%d-%d", p.id, tokens[k])
			deadline := t + int64(ttl)
			ok := history.Event{Time: t + lat, Type: history.OK, Process: p.id, F: history.FAcquire, Key: key,
				Value: value, Token: tokens[k], Deadline: deadline, Validity: deadline - (t + lat), Nodes: nodes}
			q = append(q, ok)
			w0 := ok.Time + between(50*time.Microsecond, 300*time.Microsecond)
			w1 := w0 + between(time.Millisecond, 10*time.Millisecond)
			fate := rng.Float64()
			if fate < 0.005 {
				w1 = deadline + between(time.Millisecond, 30*time.Millisecond) // a pause: overrun
			}
			q = append(q,
				history.Event{Time: w0, Type: history.Invoke, Process: p.id, F: history.FWork, Key: key, Value: value},
				history.Event{Time: w1, Type: history.OK, Process: p.id, F: history.FWork, Key: key, Value: value})
			started++
			if fate >= 0.005 && fate < 0.015 {
				// The holder stalls and never releases: the lease expires.
				freeAt[k] = deadline
				p.rest = deadline + between(time.Millisecond, 20*time.Millisecond)
			} else {
				r0 := w1 + between(50*time.Microsecond, 300*time.Microsecond)
				r1 := r0 + between(200*time.Microsecond, 2*time.Millisecond)
				q = append(q,
					history.Event{Time: r0, Type: history.Invoke, Process: p.id, F: history.FRelease, Key: key, Value: value},
					history.Event{Time: r1, Type: history.OK, Process: p.id, F: history.FRelease, Key: key, Value: value})
				freeAt[k] = min(r0, deadline)
				started++
				p.rest = r1 + between(500*time.Microsecond, 3*time.Millisecond)
			}
			p.queue = q
		}
		p.next = t
		heap.Push(g, p)
	}
	return out
}

// genProc is a simulated process: the events it has decided but not yet emitted, and when it acts
// next once they are out.
type genProc struct {
	slot  int
	id    int
	next  int64 // time of the next event or action
	rest  int64 // when to act after the queue drains
	queue []history.Event
}

// genQueue orders processes by their next time, then slot, so emission is in time order.
type genQueue []*genProc

func (q genQueue) Len() int { return len(q) }
func (q genQueue) Less(i, j int) bool {
	if q[i].next != q[j].next {
		return q[i].next < q[j].next
	}
	return q[i].slot < q[j].slot
}
func (q genQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *genQueue) Push(x any)   { *q = append(*q, x.(*genProc)) }
func (q *genQueue) Pop() any {
	old := *q
	p := old[len(old)-1]
	*q = old[:len(old)-1]
	return p
}
