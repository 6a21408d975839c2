package browse

import (
	"github.com/lockpick-dev/lockpick/checker"
)

// findings name what made a run invalid, kind by kind ("1 pair of overlapping holds", "3 early
// lease losses"), in the checker's own words (checker.Tallies), or why it is unknown; empty for a
// valid run.
func findings(r *checker.Result) []string {
	var out []string
	for _, t := range r.Tallies() {
		out = append(out, checker.Phrase(t.Kind, t.Count))
	}
	if r.Valid == checker.Unknown && r.UnknownReason != "" {
		out = append(out, r.UnknownReason)
	}
	return out
}
