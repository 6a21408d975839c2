package checker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// mutantFs are the operations a mutated event may claim to be: the client's, the lock's own news,
// the nemesis's and the harness's.
var mutantFs = []string{history.FAcquire, history.FRelease, history.FExtend, history.FWork, history.FRead,
	history.FWrite, history.FRenewed, history.FLost, "crash", "kill", "run", "bump-forward", "reset"}

// mutate changes one event of evs, or the list itself, as a hand-made or damaged history would: an
// event dropped, repeated or moved in time, its outcome, key, value, deadline, depth, process,
// operation, token or index changed. op and at choose what and where.
func mutate(evs []history.Event, op, at byte, rng *rand.Rand) []history.Event {
	if len(evs) == 0 {
		return evs
	}
	i := int(at) % len(evs)
	e := &evs[i]
	odd := []int64{0, -1, 1, math.MaxInt64, math.MinInt64, e.Time, e.Time + 1, e.Time - 1}
	switch op % 14 {
	case 0:
		return append(evs[:i:i], evs[i+1:]...)
	case 1:
		return append(evs[:i+1:i+1], evs[i:]...)
	case 2:
		if i+1 < len(evs) {
			e.Time, evs[i+1].Time = evs[i+1].Time, e.Time
		}
	case 3:
		e.Type = []history.Type{history.Invoke, history.OK, history.Fail, history.Info, "maybe"}[rng.Intn(5)]
	case 4:
		e.Key = []string{"", "k0", "k1", e.Value}[rng.Intn(4)]
	case 5:
		e.Value = []string{"", "v", e.Key, fmt.Sprint(rng.Intn(5))}[rng.Intn(4)]
	case 6:
		e.Deadline = odd[rng.Intn(len(odd))]
	case 7:
		e.Depth = rng.Intn(4) - 1
	case 8:
		e.Process = rng.Intn(6) - 3
	case 9:
		e.F = mutantFs[rng.Intn(len(mutantFs))]
	case 10:
		e.Token = odd[rng.Intn(len(odd))]
	case 11:
		e.Validity = odd[rng.Intn(len(odd))]
	case 12:
		e.Index += int64(rng.Intn(3) - 1)
	case 13:
		e.Time = odd[rng.Intn(len(odd))]
	}
	return evs
}

// mutatedHistory is a generated history (random holds, reentrant chains with crashes, or counter
// work) with len(muts)/2 mutations applied.
func mutatedHistory(seed int64, muts []byte) []history.Event {
	rng := rand.New(rand.NewSource(seed))
	var evs []history.Event
	switch rng.Intn(3) {
	case 0:
		evs = randomHistory(rng, 2+rng.Intn(3), 1+rng.Intn(2), 5+rng.Intn(30))
	case 1:
		evs = reentrantHistory(rng)
	default:
		evs = genCounter(seed, 20+rng.Intn(40), 3)
	}
	for k := 0; k+1 < len(muts) && k < 16; k += 2 {
		evs = mutate(evs, muts[k], muts[k+1], rng)
	}
	return evs
}

// FuzzMutatedHistories feeds the checker damaged and hand-made-looking histories: it must never
// panic, and reading them one line at a time (lockpick check) must give what reading them whole
// gives: the same refusal, naming the same line, or the same result. Run it longer with
// `go test ./checker -run '^$' -fuzz FuzzMutatedHistories -fuzztime 5m`.
func FuzzMutatedHistories(f *testing.F) {
	for s := range int64(12) {
		f.Add(s, []byte{byte(s), byte(3 * s), 6, byte(s + 1), 9, 2})
	}
	f.Fuzz(func(t *testing.T, seed int64, muts []byte) {
		evs := mutatedHistory(seed, muts)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for _, e := range evs {
			if err := enc.Encode(e); err != nil {
				t.Fatal(err)
			}
		}
		whole, werr := checkWhole(bytes.NewReader(buf.Bytes()))
		streamed, serr := CheckReader(bytes.NewReader(buf.Bytes()), Options{})
		if (werr == nil) != (serr == nil) || werr != nil && werr.Error() != serr.Error() {
			t.Fatalf("streamed check says %v, the whole history %v\n%s", serr, werr, dumpEvents(evs))
		}
		if werr != nil {
			return
		}
		if a, b := resultText(t, whole), resultText(t, streamed); a != b {
			t.Fatalf("streamed result differs from the whole history's:\n%s\n---\n%s\n%s", b, a, dumpEvents(evs))
		}
	})
}

// checkWhole reads the whole history first and checks the slice, as Check does.
func checkWhole(r *bytes.Reader) (*Result, error) {
	l, err := history.ReadLog(r)
	if err != nil {
		return nil, err
	}
	return CheckLog(l, Options{})
}
