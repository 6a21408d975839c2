package nemesis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/links"
)

// timedPlan draws a schedule of faults that each start, last a while and heal: the first fault
// starts about one interval into the run, each next one about an interval after the last began but
// never before the last healed, and a fault whose heal would fall at or past limit is left out, so
// every fault heals on schedule inside the fault phase. next builds the operations of a fault starting
// at at and returns them with the time of its heal.
func timedPlan(rng *rand.Rand, interval, limit time.Duration, next func(at time.Duration) ([]Op, time.Duration)) []Op {
	var plan []Op
	if interval <= 0 {
		return nil
	}
	t := jitter(rng, interval)
	for t < limit {
		ops, end := next(t)
		if end >= limit || len(ops) == 0 {
			break
		}
		plan = append(plan, ops...)
		t = max(t+jitter(rng, interval), end+100*time.Millisecond)
	}
	sort.SliceStable(plan, func(i, j int) bool { return plan[i].At < plan[j].At })
	return plan
}

// toxicSet remembers which toxics a nemesis put on which links, so that a heal removes exactly them
// and the final heal removes whatever is still in place.
type toxicSet struct {
	links *links.Set

	mu     sync.Mutex
	placed map[string][]placedToxic // link name -> toxics on it
}

type placedToxic struct {
	link *links.Link
	name string
}

// add puts toxics on the link from group to node.
func (s *toxicSet) add(group, node string, toxics []links.Toxic) error {
	if s.links == nil {
		return fmt.Errorf("no links to put toxics on")
	}
	l, err := s.links.Get(group, node)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.placed == nil {
		s.placed = map[string][]placedToxic{}
	}
	for _, t := range toxics {
		if slices.ContainsFunc(s.placed[l.Name()], func(p placedToxic) bool { return p.name == t.Name }) {
			continue // already in place: the fault is in effect
		}
		if err := l.AddToxic(t); err != nil {
			return err
		}
		s.placed[l.Name()] = append(s.placed[l.Name()], placedToxic{l, t.Name})
	}
	return nil
}

// remove takes every toxic this set placed off the link from group to node.
func (s *toxicSet) remove(ctx context.Context, group, node string) error {
	return s.removeAndReset(ctx, group, node, false)
}

// removeAndReset is remove; with reset (the node behind the link died while the toxics held its
// connections), it renews the link instead: its connections close and its toxics go at once (see
// links.Set.Renew).
func (s *toxicSet) removeAndReset(ctx context.Context, group, node string, reset bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := group + "->" + node
	if ps := s.placed[name]; reset && len(ps) > 0 {
		if err := s.links.Renew(ps[0].link); err != nil {
			return err
		}
		delete(s.placed, name)
		return nil
	}
	var errs []error
	var left []placedToxic
	for _, p := range s.placed[name] {
		if err := p.link.RemoveToxic(ctx, p.name); err != nil {
			errs = append(errs, err)
			left = append(left, p)
		}
	}
	if len(left) == 0 {
		delete(s.placed, name)
	} else {
		s.placed[name] = left
	}
	return errors.Join(errs...)
}

// inPlace lists the links that carry toxics, as group -> nodes.
func (s *toxicSet) inPlace() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]string{}
	for _, ps := range s.placed {
		if len(ps) > 0 {
			l := ps[0].link
			out[l.Group] = append(out[l.Group], l.Node)
		}
	}
	for g := range out {
		slices.Sort(out[g])
	}
	return out
}

// Cuts maps a client group to the nodes a fault separates it from (or slows its path to).
type Cuts map[string][]string

// String is the readable form used in Op.F after the verb: "c1/n4,n5 c2/n1,n2", groups sorted.
func (c Cuts) String() string {
	var parts []string
	for _, g := range slices.Sorted(maps.Keys(c)) {
		if len(c[g]) == 0 {
			continue
		}
		parts = append(parts, g+"/"+strings.Join(c[g], ","))
	}
	return strings.Join(parts, " ")
}

// Nodes are every node the cuts touch, sorted.
func (c Cuts) Nodes() []string {
	var out []string
	for _, ns := range c {
		for _, n := range ns {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// ParseCuts reads the form String writes.
func ParseCuts(s string) (Cuts, error) {
	c := Cuts{}
	for _, part := range strings.Fields(s) {
		g, ns, ok := strings.Cut(part, "/")
		if !ok || g == "" || ns == "" {
			return nil, fmt.Errorf("cut %q is not group/node,node", part)
		}
		c[g] = append(c[g], strings.Split(ns, ",")...)
	}
	return c, nil
}

// opWithCuts is an operation named "verb c1/n1,n2 ..." whose Nodes are the nodes the cuts touch.
func opWithCuts(at time.Duration, verb string, c Cuts, effect string) Op {
	return Op{At: at, F: verb + " " + c.String(), Nodes: c.Nodes(), Effect: effect}
}

// splitVerb separates an operation's verb from its cuts.
func splitVerb(f string) (string, Cuts, error) {
	verb, rest, _ := strings.Cut(f, " ")
	c, err := ParseCuts(rest)
	return verb, c, err
}

// splitHalves splits items at random into two halves; with an odd count either half may be the larger.
func splitHalves(rng *rand.Rand, items []string) (a, b []string) {
	perm := rng.Perm(len(items))
	k := len(items) / 2
	if len(items)%2 == 1 && rng.IntN(2) == 0 {
		k++
	}
	for i, j := range perm {
		if i < k {
			a = append(a, items[j])
		} else {
			b = append(b, items[j])
		}
	}
	slices.Sort(a)
	slices.Sort(b)
	return a, b
}

// leaseResolver chooses the nodes of a lock-aware or role target when the fault starts.
type leaseResolver struct {
	env    Env
	target string

	mu  sync.Mutex
	rng *rand.Rand
}

// seed gives the resolver its own random source, drawn from the plan's.
func (r *leaseResolver) seed(rng *rand.Rand) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rng = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
}

// pick waits up to wait for a lease of the target's shape and returns the nodes to hit. No such
// lease in time is no error: the fault is skipped (and logged), as no interleaving it aims at exists.
// A role target names the nodes with the role now, at once.
func (r *leaseResolver) pick(ctx context.Context, wait time.Duration) ([]string, error) {
	if IsRoleTarget(r.target) {
		return RoleNodes(r.env, r.target), nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rng == nil {
		r.rng = rand.New(rand.NewPCG(1, 2))
	}
	nodes, lease, err := WaitForLeaseTarget(ctx, r.env, r.rng, r.target, wait, 5*time.Millisecond)
	if errors.Is(err, ErrNoLease) {
		if r.env.Log != nil {
			r.env.Log.Info("lock-aware fault skipped", "target", r.target, "err", err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if r.env.Log != nil {
		r.env.Log.Debug("lock-aware target", "target", r.target, "key", lease.Key, "holders", lease.Nodes, "hit", nodes)
	}
	return nodes, nil
}
