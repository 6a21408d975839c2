package browse

import (
	"fmt"

	"github.com/lockpick-dev/lockpick/checker"
)

// findings name what made a run invalid, kind by kind ("1 pair of overlapping holds", "3 early
// lease losses"), or why it is unknown; empty for a valid run. The words are the run's summary's;
// once the checker names its findings itself (checker.Tallies), this should ask it instead.
func findings(r *checker.Result) []string {
	var out []string
	add := func(n int, one, many string) {
		switch {
		case n == 1:
			out = append(out, "1 "+one)
		case n > 1:
			out = append(out, fmt.Sprintf("%d %s", n, many))
		}
	}
	add(r.ViolationCount, "pair of overlapping holds", "pairs of overlapping holds")
	add(r.EarlyLossCount, "early lease loss", "early lease losses")
	add(r.LateExtendCount, "late extend", "late extends")
	add(r.TokenRegressionCount, "token regression", "token regressions")
	if res := r.Resource; res != nil {
		add(res.StaleWriteCount, "stale write", "stale writes")
		add(int(res.LostUpdates), "lost update", "lost updates")
		if res.Valid == checker.Invalid && res.StaleWriteCount == 0 && res.LostUpdates == 0 {
			out = append(out, "counter history not linearizable")
		}
	}
	if lv := r.Liveness; lv != nil && lv.Verdict == checker.LiveDeadlock {
		n := 0
		for _, f := range lv.Findings {
			if f.Kind == checker.LiveDeadlock {
				n++
			}
		}
		add(max(n, 1), "deadlocked key", "deadlocked keys")
	}
	if r.Valid == checker.Unknown && r.UnknownReason != "" {
		out = append(out, r.UnknownReason)
	}
	return out
}
