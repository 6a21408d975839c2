// Command genhistory writes a generated history (checker.Generate) of about -ops operations to a
// file, for the check-from-disk benchmark (make bench). Large histories are written as a chain of
// one-million-operation chunks, each with its own seed and shifted past the previous one in time,
// index and process ids, so memory stays that of one chunk whatever the size. With -overlaps N, the
// first acquire refused as held after every N events is granted instead, and released at once: a
// lock that breaks all through the run (an invalid history, as long as a valid one).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
)

func main() {
	ops := flag.Int("ops", 1_000_000, "operations to generate")
	seed := flag.Int64("seed", 1, "seed of the first chunk")
	out := flag.String("o", "", "output file")
	overlaps := flag.Int("overlaps", 0, "grant a refused acquire after every this many events (0: never)")
	flag.Parse()
	if *out == "" || *ops <= 0 || *overlaps < 0 {
		fmt.Fprintln(os.Stderr, "genhistory: give -o FILE, a positive -ops and -overlaps of 0 or more")
		os.Exit(255)
	}
	if err := write(*out, *ops, *seed, *overlaps); err != nil {
		fmt.Fprintln(os.Stderr, "genhistory:", err)
		os.Exit(255)
	}
}

const chunk = 1_000_000

func write(path string, ops int, seed int64, overlaps int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	var index, shift, tokens int64
	procs, sinceOverlap := 0, 0
	for done := 0; done < ops; done += chunk {
		events := checker.Generate(seed+int64(done/chunk), min(chunk, ops-done), 1)
		top, topToken := 0, tokens
		for _, e := range events {
			e.Index = index
			index++
			e.Time += shift
			if e.Deadline > 0 {
				e.Deadline += shift
			}
			if e.Token > 0 {
				e.Token += tokens // fencing tokens only go up, across chunks too
				topToken = max(topToken, e.Token)
			}
			if e.Process >= 0 {
				e.Process += procs // each chunk's processes are new ones
				top = max(top, e.Process+1)
			}
			sinceOverlap++
			if overlaps > 0 && sinceOverlap >= overlaps && e.Type == history.Fail && e.Reason == history.ReasonHeld {
				sinceOverlap = 0
				index-- // e's own index goes to the grant
				for _, g := range grantedAnyway(e) {
					g.Index = index
					index++
					if err := enc.Encode(g); err != nil {
						return err
					}
				}
				continue
			}
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		procs, tokens = top, topToken
		// The next chunk starts after every lease of this one has ended.
		shift = events[len(events)-1].Time + shift + int64(time.Second)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// grantedAnyway is the acquire refused by e granted instead, while another holds the key, and
// released a nanosecond later and another.
func grantedAnyway(e history.Event) []history.Event {
	value := fmt.Sprintf("p%d-overlap-%d", e.Process, e.Index)
	ok := history.Event{Time: e.Time, Type: history.OK, Process: e.Process, F: history.FAcquire, Key: e.Key,
		Value: value, Deadline: e.Time + int64(100*time.Millisecond), Validity: int64(99 * time.Millisecond)}
	inv := history.Event{Time: e.Time + 1, Type: history.Invoke, Process: e.Process, F: history.FRelease, Key: e.Key, Value: value}
	done := inv
	done.Time, done.Type = e.Time+2, history.OK
	return []history.Event{ok, inv, done}
}
