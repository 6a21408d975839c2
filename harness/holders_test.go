package harness

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/nemesis"
)

// The holders are the processes whose grant the history shows and whose release it does not, each
// with its process's client group, across fresh process ids; an inner level of a reentrant lock
// changes nothing, a refused or timed-out acquire holds nothing.
func TestHoldersFollowGrantsAndReleases(t *testing.T) {
	sys := &system{groups: []string{"c1", "c2"}}
	h := newHolders(func(p int) string { return sys.groupOf(p, 4) })
	start := time.Now()
	h.begin(start)
	ms := func(n int) int64 { return int64(time.Duration(n) * time.Millisecond) }
	for _, e := range []history.Event{
		{Type: history.Invoke, Process: 1, F: history.FAcquire, Key: "a", Time: ms(1)},
		{Type: history.OK, Process: 1, F: history.FAcquire, Time: ms(2), Value: "v1"},
		{Type: history.Invoke, Process: 6, F: history.FAcquire, Key: "b", Time: ms(3)},
		{Type: history.OK, Process: 6, F: history.FAcquire, Key: "b", Time: ms(4), Value: "v6"},
		{Type: history.Invoke, Process: 1, F: history.FAcquire, Key: "a", Time: ms(5), Depth: 2},
		{Type: history.OK, Process: 1, F: history.FAcquire, Key: "a", Time: ms(6), Depth: 2},
		{Type: history.Invoke, Process: 1, F: history.FRelease, Key: "a", Time: ms(7), Depth: 2},
		{Type: history.Invoke, Process: 3, F: history.FAcquire, Key: "a", Time: ms(8)},
		{Type: history.Fail, Process: 3, F: history.FAcquire, Key: "a", Time: ms(9)},
		{Type: history.Invoke, Process: 0, F: history.FAcquire, Key: "b", Time: ms(10)},
		{Type: history.Info, Process: 0, F: history.FAcquire, Key: "b", Time: ms(11)},
	} {
		h.observe(&e)
	}
	want := []nemesis.Holder{
		{Process: 1, Group: "c2", Key: "a", Since: start.Add(2 * time.Millisecond)},
		{Process: 6, Group: "c1", Key: "b", Since: start.Add(4 * time.Millisecond)},
	}
	got := h.Holders()
	slices.SortFunc(got, func(a, b nemesis.Holder) int { return a.Process - b.Process })
	if !slices.Equal(got, want) {
		t.Fatalf("holders %+v, want %+v", got, want)
	}
	h.observe(&history.Event{Type: history.Invoke, Process: 1, F: history.FRelease, Key: "a", Time: ms(12)})
	if got := h.Holders(); len(got) != 1 || got[0].Process != 6 {
		t.Fatalf("after p1's release the holders are %+v, want p6 alone", got)
	}
}

// A watcher is called as a release's invoke is observed (an inner level's release is none), and no
// more once stopped.
func TestHoldersTellOfReleases(t *testing.T) {
	h := newHolders(func(int) string { return "c1" })
	h.begin(time.Now())
	heard := 0
	stop := h.OnRelease(func() { heard++ })
	for _, e := range []history.Event{
		{Type: history.Invoke, Process: 1, F: history.FAcquire, Key: "a"},
		{Type: history.OK, Process: 1, F: history.FAcquire, Key: "a"},
		{Type: history.Invoke, Process: 1, F: history.FRelease, Key: "a", Depth: 2},
	} {
		h.observe(&e)
	}
	if heard != 0 {
		t.Fatal("a watcher heard of a release before any was invoked")
	}
	h.observe(&history.Event{Type: history.Invoke, Process: 1, F: history.FRelease, Key: "a"})
	h.observe(&history.Event{Type: history.Invoke, Process: 2, F: history.FRelease, Key: "a"})
	if heard != 2 {
		t.Fatalf("two releases invoked: heard of %d", heard)
	}
	stop()
	h.observe(&history.Event{Type: history.Invoke, Process: 1, F: history.FRelease, Key: "a"})
	if heard != 2 {
		t.Fatal("a stopped watcher heard of a release")
	}
}

// A partition with group=holder cuts, at every fault, the group of a process that holds the lock
// right then: each cut in the history names the group of a process whose grant precedes it and
// whose release does not.
func TestPartitionAimsAtTheHoldersGroup(t *testing.T) {
	t.Parallel()
	out := run(t, Config{
		Lock: "single", Nemesis: "partition:group=holder:duration=600ms:interval=1s", Clients: 6, ClientGroups: 3, Keys: 1, Seed: 2,
		TTL: Duration(time.Second), TimeLimit: Duration(6 * time.Second), Recovery: Duration(time.Second),
	})
	evs, err := history.ReadFile(filepath.Join(out.Dir, history.FileName))
	if err != nil {
		t.Fatal(err)
	}
	sys := &system{groups: []string{"c1", "c2", "c3"}}
	h := newHolders(func(p int) string { return sys.groupOf(p, 6) })
	cuts := 0
	for _, e := range evs {
		if e.IsNemesis() && e.Type == history.Invoke && e.Effect == history.EffectFault {
			cuts++
			var groups []string
			for _, x := range h.Holders() {
				groups = append(groups, x.Group)
			}
			_, rest, _ := strings.Cut(e.F, " ")
			c, err := nemesis.ParseCuts(rest)
			if err != nil || len(c) != 1 {
				t.Fatalf("cut %q: %v", e.F, err)
			}
			cut := slices.Collect(maps.Keys(c))[0]
			if !slices.Contains(groups, cut) {
				t.Errorf("%s at %v: the holders then were in %v", e.F, time.Duration(e.Time), groups)
			}
		}
		h.observe(&e)
	}
	if cuts < 2 {
		t.Fatalf("only %d cuts in 6s", cuts)
	}
	if out.Result.Valid == checker.Unknown {
		t.Fatalf("verdict unknown:\n%s", out.Result.Summary())
	}
}
