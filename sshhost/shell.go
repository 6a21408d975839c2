package sshhost

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
)

// A session of its own per command costs a host's sshd a fork and several round trips: measured
// 0.5-0.9 s a command on the namespace test hosts of a loaded machine, more than a lease's TTL.
// A fault must land in milliseconds, so the runner keeps shells open on each host and writes each
// script to one that is free: a command is then a write and a read on an open channel.

// shellDone ends each script's output, with the script's status.
const shellDone = "__lockpick_done__"

// maxShells bounds the shells kept open on one host, below sshd's MaxSessions (10 by default); a
// script waits for a free one past it.
const maxShells = 8

// shell is a sh kept running on the host, its input and output attached.
type shell struct {
	s   *ssh.Session
	in  io.WriteCloser
	out *bufio.Reader
}

func (h *Host) openShell() (*shell, error) {
	s, err := h.client.NewSession()
	if err != nil {
		return nil, fmt.Errorf("ssh %s: new session: %w", h.addr, err)
	}
	in, err := s.StdinPipe()
	if err != nil {
		s.Close()
		return nil, err
	}
	out, err := s.StdoutPipe()
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := s.Start("sh"); err != nil {
		s.Close()
		return nil, fmt.Errorf("ssh %s: start a shell: %w", h.addr, err)
	}
	return &shell{s: s, in: in, out: bufio.NewReader(out)}, nil
}

// run runs script in a subshell (an exit or cd in it leaves the kept shell as it was), its
// standard error with its output, and returns the output and the status.
func (sh *shell) run(script string) ([]byte, int, error) {
	if _, err := io.WriteString(sh.in, "( "+script+"\n) </dev/null 2>&1; printf '\\n"+shellDone+" %d\\n' $?\n"); err != nil {
		return nil, 0, err
	}
	var out strings.Builder
	for {
		line, err := sh.out.ReadString('\n')
		if err != nil {
			return nil, 0, err
		}
		if rest, ok := strings.CutPrefix(line, shellDone+" "); ok {
			status, err := strconv.Atoi(strings.TrimSpace(rest))
			// The newline printed before the marker is not the script's.
			return []byte(strings.TrimSuffix(out.String(), "\n")), status, err
		}
		out.WriteString(line)
	}
}

// shells is a host's pool of kept shells.
type shells struct {
	mu    sync.Mutex
	free  []*shell
	slots chan struct{}
}

// Sh runs script through a shell kept open on the host and returns its output (standard output and
// error together). A status other than 0 is an error carrying the end of the output. A script cut
// short by ctx loses its shell (its state is unknown), not the connection.
func (h *Host) Sh(ctx context.Context, script string) ([]byte, error) {
	select {
	case h.pool.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("ssh %s: %s: %w", h.addr, short(script), ctx.Err())
	}
	defer func() { <-h.pool.slots }()
	sh, err := h.takeShell()
	if err != nil {
		return nil, err
	}
	type result struct {
		out    []byte
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		out, status, err := sh.run(script)
		done <- result{out, status, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			sh.s.Close()
			return nil, fmt.Errorf("ssh %s: %s: the shell ended: %w", h.addr, short(script), r.err)
		}
		h.putShell(sh)
		if r.status != 0 {
			return r.out, fmt.Errorf("ssh %s: %s: exit status %d%s", h.addr, short(script), r.status, tail(string(r.out)))
		}
		return r.out, nil
	case <-ctx.Done():
		sh.s.Close()
		return nil, fmt.Errorf("ssh %s: %s: %w", h.addr, short(script), ctx.Err())
	}
}

func (h *Host) takeShell() (*shell, error) {
	h.pool.mu.Lock()
	if n := len(h.pool.free); n > 0 {
		sh := h.pool.free[n-1]
		h.pool.free = h.pool.free[:n-1]
		h.pool.mu.Unlock()
		return sh, nil
	}
	h.pool.mu.Unlock()
	return h.openShell()
}

func (h *Host) putShell(sh *shell) {
	h.pool.mu.Lock()
	defer h.pool.mu.Unlock()
	h.pool.free = append(h.pool.free, sh)
}

// Warm opens n kept shells now, so the first faults do not wait for them.
func (h *Host) Warm(n int) error {
	var errs []error
	for range min(n, maxShells) {
		sh, err := h.openShell()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		h.putShell(sh)
	}
	return errors.Join(errs...)
}
