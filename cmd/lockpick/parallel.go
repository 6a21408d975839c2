package main

import "sync"

// eachAtOnce calls fn(0) to fn(n-1), at most parallel calls at a time, in order of i, and returns the
// first error; once a call has failed no new one starts. Runs mostly wait (on think times and the
// network), and each has its own nodes and ports, so a few at once cost the verdicts nothing.
func eachAtOnce(n, parallel int, fn func(i int) error) error {
	next := make(chan int)
	errs := make(chan error, max(parallel, 1))
	var wg sync.WaitGroup
	for range max(parallel, 1) {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}
