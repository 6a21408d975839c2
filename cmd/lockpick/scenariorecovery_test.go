package main

import (
	"testing"
	"time"

	"github.com/lockpick-dev/lockpick/scenarios"
)

// Every shipped scenario runs long enough after its last heal for the checker to judge liveness:
// the lease expiry plus a margin (checker/liveness.go's window: expiry + max(expiry, 1s)), and a
// second for the last heal and the final events. A shorter recovery leaves liveness unjudged and
// prints advice to lengthen it, which a shipped file should never need.
func TestScenarioRecoveryJudgesLiveness(t *testing.T) {
	all, err := scenarios.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		cfg := s.Config
		if err := cfg.Resolve(); err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		expiry := cfg.Expiry()
		need := expiry + max(expiry, time.Second) + time.Second
		if got := time.Duration(cfg.Recovery); got < need {
			t.Errorf("%s: recovery %v, want at least %v (lease expiry %v): set recovery: %v in %s",
				s.Name, got, need, expiry, need.Round(time.Second), s.File)
		}
	}
}
