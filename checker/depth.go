package checker

import (
	"slices"
	"strconv"

	"github.com/lockpick-dev/lockpick/history"
)

// Depth (step 0). A reentrant lock's ok acquire carries the count after it (1 = the outermost
// level) and a release's invoke the level it leaves, the depth its lease was granted at. The
// validator keeps, per process and key, the levels granted and not yet left, and refuses a history
// whose depths do not add up:
//
//   - an ok acquire at depth d > 1 needs a level d-1 of the process on that key; depth 1 is always
//     a fresh grant (a lock that lost the process's earlier levels starts again at 1);
//   - a release at depth d needs a level d, which it leaves when it completes ok or fails with
//     reason lost (the lease is gone); a release that failed otherwise left nothing, so the client
//     may retry it;
//   - after an acquire or release on the key ended with info, the process's count there is unknown
//     (the harness also retires its id), and the next depth it records is taken as it comes; so is
//     the first depth a process records on a key, because a fresh id may carry on the levels of the
//     id it replaced (the checker cannot tell which);
//   - depth is on ok acquires and on releases only (a release's completion may carry the count
//     after it, one less than its invoke's).

// depthKey names one process's levels on one key.
type depthKey struct {
	process int
	key     string
}

// depthState is a process's levels on a key: the depths granted and not yet left (a re-entry
// after a fresh grant can hold one depth twice). known is false until the process's count there is
// known (see above).
type depthState struct {
	open  []int
	known bool
}

func (v *validator) depthOf(p int, key string) *depthState {
	if v.depths == nil {
		v.depths = map[depthKey]*depthState{}
	}
	k := depthKey{p, key}
	d := v.depths[k]
	if d == nil {
		d = &depthState{}
		v.depths[k] = d
	}
	return d
}

// adopt takes the levels below depth d as held, for a process whose count is unknown.
func (d *depthState) adopt(depth int) {
	if d.known {
		return
	}
	d.open = d.open[:0]
	for l := 1; l < depth; l++ {
		d.open = append(d.open, l)
	}
	d.known = true
}

// depthInvoke checks the depth of invoke i: a release's level must be one the process holds.
func (v *validator) depthInvoke(i int) error {
	e := v.st.at(i)
	switch {
	case e.Depth == 0:
		return nil
	case e.F == history.FAcquire:
		return v.fail(i, "process %d's acquire invoke carries depth %d: the depth of an acquire is the count the lock reports on its ok completion", e.Process, e.Depth)
	case e.F != history.FRelease || e.Key == "":
		return nil
	}
	d := v.depthOf(e.Process, e.Key)
	if d.known && !slices.Contains(d.open, e.Depth) {
		return v.fail(i, "process %d releases key %q at depth %d but holds it at %s: a release leaves a level the process entered and has not left",
			e.Process, e.Key, e.Depth, levelsWord(d.open))
	}
	if !d.known {
		d.adopt(e.Depth)
		d.open = append(d.open, e.Depth)
	}
	return nil
}

// depthDone checks the depth of completion i of the operation invoked at j, and counts its levels.
func (v *validator) depthDone(i, j int) error {
	e, inv := v.st.at(i), v.st.at(j)
	key := inv.Key
	if key == "" {
		key = e.Key
	}
	switch {
	case e.F == history.FAcquire && e.Depth != 0 && e.Type != history.OK:
		return v.fail(i, "process %d's acquire ended %s with depth %d: only an ok acquire has a count", e.Process, e.Type, e.Depth)
	case e.F == history.FRelease && e.Depth != 0 && e.Depth != inv.Depth-1:
		return v.fail(i, "process %d's release completed with depth %d, but its invoke on line %d left depth %d: a release's completion, if it carries a depth, carries the count after it (%d)",
			e.Process, e.Depth, v.line(j), inv.Depth, max(inv.Depth-1, 0))
	case key == "" || e.F != history.FAcquire && e.F != history.FRelease:
		return nil
	}
	if e.Type == history.Info {
		// Unknown outcome: the count may or may not have moved.
		if d := v.depths[depthKey{e.Process, key}]; d != nil {
			d.open, d.known = d.open[:0], false
		}
		return nil
	}
	if e.F == history.FRelease {
		if inv.Depth > 0 && (e.Type == history.OK || e.Reason == history.ReasonLost) {
			d := v.depthOf(e.Process, key)
			if k := slices.Index(d.open, inv.Depth); k >= 0 {
				d.open = slices.Delete(d.open, k, k+1)
			}
		}
		return nil
	}
	if e.Type != history.OK || e.Depth == 0 {
		return nil
	}
	d := v.depthOf(e.Process, key)
	if d.known && e.Depth > 1 && !slices.Contains(d.open, e.Depth-1) {
		return v.fail(i, "process %d entered key %q at depth %d but held it at %s: a re-entry at depth d needs a level d-1 the process has not left",
			e.Process, key, e.Depth, levelsWord(d.open))
	}
	d.adopt(e.Depth)
	d.open = append(d.open, e.Depth)
	return nil
}

// levelsWord names the levels a process holds: "depth 1 and 2", or "no depth (it holds no level)".
func levelsWord(open []int) string {
	if len(open) == 0 {
		return "no depth (it holds no level)"
	}
	s := slices.Sorted(slices.Values(open))
	w := "depth"
	for k, l := range s {
		switch {
		case k == 0:
			w += " "
		case k == len(s)-1:
			w += " and "
		default:
			w += ", "
		}
		w += strconv.Itoa(l)
	}
	return w
}
