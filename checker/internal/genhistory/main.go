// Command genhistory writes a generated history (checker.Generate) of about -ops operations to a
// file, for the check-from-disk benchmark (make bench). Large histories are written as a chain of
// one-million-operation chunks, each with its own seed and shifted past the previous one in time,
// index and process ids, so memory stays that of one chunk whatever the size.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
)

func main() {
	ops := flag.Int("ops", 1_000_000, "operations to generate")
	seed := flag.Int64("seed", 1, "seed of the first chunk")
	out := flag.String("o", "", "output file")
	flag.Parse()
	if *out == "" || *ops <= 0 {
		fmt.Fprintln(os.Stderr, "genhistory: give -o FILE and a positive -ops")
		os.Exit(255)
	}
	if err := write(*out, *ops, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "genhistory:", err)
		os.Exit(255)
	}
}

const chunk = 1_000_000

func write(path string, ops int, seed int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	var index, shift, tokens int64
	procs := 0
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
