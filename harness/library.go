package harness

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lockpick-dev/lockpick/history"
	"github.com/lockpick-dev/lockpick/locks"
)

// libraries gathers the library a run tested, as each process's lock names it: a client program
// by its init_ok (every process may say something else), any other lock by its kind alone.
type libraries struct {
	kind history.Library

	mu    sync.Mutex
	byLib map[string][]int // "name\x00version" -> the processes that reported it, in order
	libs  map[string]history.Library
}

func newLibraries(k locks.Kind, revision string) *libraries {
	return &libraries{kind: locks.LibraryOf(k, revision), byLib: map[string][]int{}, libs: map[string]history.Library{}}
}

// opened notes the library process's lock names, if it names one.
func (l *libraries) opened(process int, lock locks.Locker) {
	id, ok := lock.(locks.Identified)
	if !ok {
		return
	}
	lib := id.Library()
	key := lib.Name + "\x00" + lib.Version
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byLib[key] = append(l.byLib[key], process)
	l.libs[key] = lib
}

// library is what the run tested: the kind's library, or the one most processes reported, with a
// note naming the processes that reported another; nil when nothing named one (no process opened).
func (l *libraries) library() *history.Library {
	if l.kind.Name != "" {
		lib := l.kind
		return &lib
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.byLib) == 0 {
		return nil
	}
	keys := make([]string, 0, len(l.byLib))
	for k := range l.byLib {
		keys = append(keys, k)
	}
	// Most processes first; a tie goes to the one reported first (the lowest process id).
	slices.SortFunc(keys, func(a, b string) int {
		if d := len(l.byLib[b]) - len(l.byLib[a]); d != 0 {
			return d
		}
		return slices.Min(l.byLib[a]) - slices.Min(l.byLib[b])
	})
	lib := l.libs[keys[0]]
	for _, k := range keys[1:] {
		other := l.libs[k]
		lib.Notes = append(lib.Notes, fmt.Sprintf("%s reported %s %s, not %s %s as the other %d processes did",
			processList(l.byLib[k]), other.Name, other.Version, lib.Name, lib.Version, len(l.byLib[keys[0]])))
	}
	return &lib
}

// processList names processes as "p3, p7 and 2 more".
func processList(pids []int) string {
	const show = 5
	names := make([]string, 0, show)
	for _, p := range pids[:min(len(pids), show)] {
		names = append(names, "p"+strconv.Itoa(p))
	}
	s := strings.Join(names, ", ")
	if len(pids) > show {
		s += fmt.Sprintf(" and %d more", len(pids)-show)
	}
	return s
}
