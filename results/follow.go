package results

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
)

// followPoll is how long a follower waits, at the end of what was written, before it reads again.
// The recorder flushes every 50 ms, so a shorter wait would find nothing new.
const followPoll = 25 * time.Millisecond

// errAbandoned ends a follower whose run failed before its history was whole.
var errAbandoned = errors.New("the run ended without a whole history; nothing to check")

// Following is a run directory being checked while its history is written: the checker and the
// report's collector read history.jsonl as the recorder appends to it, so that when the run ends
// only the tail of the history and the checker's last steps are left. It reads the same bytes
// through the same code as CheckRun does afterwards (a test compares both), so the verdict and the
// report are the same; only "checked in" differs, which counts from the end of the history.
type Following struct {
	dir  string
	done chan struct{} // closed once the history is whole (the recorder closed it)
	stop chan struct{} // closed when the run failed: the check is abandoned
	once sync.Once

	doneAt  time.Time // when done was closed
	wg      sync.WaitGroup
	checked *Checked
	err     error
}

// FollowRun starts checking the history at path (the run directory dir's history.jsonl) while it
// is still being written. The caller ends it with Finish once the history is whole, or with Abandon.
func FollowRun(dir, path string, opts checker.Options) (*Following, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("follow history: %w", err)
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		// A device or a pipe cannot be read back as it is written; the run is checked at its end.
		f.Close()
		return nil, fmt.Errorf("follow history: %s is not a regular file", path)
	}
	fl := &Following{dir: dir, done: make(chan struct{}), stop: make(chan struct{})}
	meta, metaErr := readMeta(dir)
	fl.wg.Go(func() {
		defer f.Close()
		fl.checked, fl.err = checkRun(dir, path, history.NewScanner(&follower{f: f, poll: pollWait{done: fl.done, stop: fl.stop}}), meta, metaErr, opts)
	})
	return fl, nil
}

// FollowTap is FollowRun taking the events from rec, the recorder that writes path and has
// recorded nothing yet, as it writes them, rather than decoding them back from the file (see
// history.Tap); the file is read only for what the tap did not take. rec must close the history
// before Finish.
func FollowTap(dir, path string, rec *history.Recorder, opts checker.Options) (*Following, error) {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		// What the tap did not take is read from the file, so the file must be one that can be.
		return nil, fmt.Errorf("follow history: %s is not a regular file", path)
	}
	tap, err := rec.NewTap()
	if err != nil {
		return nil, fmt.Errorf("follow history: %w", err)
	}
	fl := &Following{dir: dir, done: make(chan struct{}), stop: make(chan struct{})}
	meta, metaErr := readMeta(dir)
	var f *os.File
	rest := func(at int64) (io.Reader, error) {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, fmt.Errorf("follow history: %w", err)
		}
		if _, err := f.Seek(at, io.SeekStart); err != nil {
			return nil, fmt.Errorf("follow history: %w", err)
		}
		return &follower{f: f, poll: pollWait{done: fl.done, stop: fl.stop}}, nil
	}
	w := &pollWait{done: fl.done, stop: fl.stop}
	src := history.NewTapReader(tap, func() bool { return closed(fl.done) }, w.wait, rest)
	fl.wg.Go(func() {
		defer func() {
			if f != nil {
				f.Close()
			}
		}()
		fl.checked, fl.err = checkRun(dir, path, src, meta, metaErr, opts)
	})
	return fl, nil
}

// pollWait waits followPoll for more of a history (at the end of the file, or an empty tap),
// ending early when done says it is whole; errAbandoned when stop says it never will be.
type pollWait struct {
	done, stop <-chan struct{}
	t          *time.Timer
}

func (w *pollWait) wait() error {
	if w.t == nil {
		w.t = time.NewTimer(followPoll)
	} else {
		w.t.Reset(followPoll)
	}
	select {
	case <-w.t.C:
	case <-w.done:
	case <-w.stop:
		return errAbandoned
	}
	return nil
}

// Finish says the history is whole and returns the check, as CheckRun would. config.json is read
// again: the run records the library it tested there only once its clients have named it.
func (fl *Following) Finish() (*Checked, error) {
	fl.once.Do(func() {
		fl.doneAt = time.Now()
		close(fl.done)
	})
	fl.wg.Wait()
	if fl.err != nil {
		return nil, fl.err
	}
	if meta, err := readMeta(fl.dir); err == nil {
		fl.checked.data.meta.Library = meta.Library
	}
	// What a user waits for at the end of a run: the history's tail and the checker's last steps.
	fl.checked.Result.CheckDuration = time.Since(fl.doneAt)
	return fl.checked, nil
}

// Abandon stops the check of a run whose history will never be whole, and waits for it to end.
func (fl *Following) Abandon() {
	fl.once.Do(func() { close(fl.stop) })
	fl.wg.Wait()
}

// checkRun is CheckRun of the run directory dir on its history at path, read from src, with
// config.json already read.
func checkRun(dir, path string, src checker.Source, meta runMeta, metaErr error, opts checker.Options) (*Checked, error) {
	c := newCollector(meta)
	opts.Observe = c.event
	res, err := checker.CheckSource(src, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The checker's holds are garbage now: collected before the report is drawn, the report reuses
	// their memory instead of growing the heap past the check's peak (a tenth of it at 10M operations).
	runtime.GC()
	return &Checked{Result: res, dir: dir, data: c.finish(res), metaErr: metaErr}, nil
}

// follower reads a file that another part of the process is appending to. At the end of what is
// there it waits for more, until done says the file is whole (then the end is the end) or stop says
// it never will be.
type follower struct {
	f    *os.File
	poll pollWait
}

func (r *follower) Read(p []byte) (int, error) {
	for {
		// Whole before this read: what the read finds is all there is.
		whole := closed(r.poll.done)
		n, err := r.f.Read(p)
		if n > 0 || (err != nil && err != io.EOF) {
			return n, err
		}
		if whole {
			return 0, io.EOF
		}
		if err := r.poll.wait(); err != nil {
			return 0, err
		}
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
