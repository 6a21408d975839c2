package main

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"
)

// eachAtOnce calls fn(0) to fn(n-1), at most parallel calls at a time, in order of i, and returns the
// first error; once a call has failed no new one starts. Runs mostly wait (on think times and the
// network), and each has its own nodes and ports, so a few at once cost the verdicts nothing.
func eachAtOnce(n, parallel int, fn func(i int) error) error {
	return eachWeighted(n, parallel, func(int) int { return 1 }, fn)
}

// eachWeighted is eachAtOnce where call i takes weight(i) of the parallel slots (at most all of
// them). Every run takes one slot today: Sentinel runs took two while a down-after of 1 s made a
// starved CPU look like a dead primary; down-after is 2 s since (systems.SentinelConfig). Calls start in order
// of i; a heavy one waits for its slots and the lighter ones behind it wait with it, so the order
// (longest first) holds.
func eachWeighted(n, parallel int, weight func(i int) int, fn func(i int) error) error {
	slots := max(parallel, 1)
	sem := semaphore.NewWeighted(int64(slots))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := range n {
		w := int64(min(max(weight(i), 1), slots))
		if ctx.Err() != nil || sem.Acquire(ctx, w) != nil {
			break // a call failed: start no more
		}
		wg.Go(func() {
			defer sem.Release(w)
			if err := fn(i); err != nil {
				once.Do(func() { first = err })
				cancel()
			}
		})
	}
	wg.Wait()
	return first
}
