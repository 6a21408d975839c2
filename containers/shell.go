package containers

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
)

// Shell is a shell kept running in a container (one exec), fed scripts on its standard input: a
// script then costs one write and one read on an open connection, about a millisecond, where an
// exec of its own costs three API calls and a process start (45-80 ms over loopback TCP here).
// That is the difference between a node killed, or a clock moved, in a millisecond as on the
// local Engine, and a fault that takes a visible while.
type Shell struct {
	name string
	mu   sync.Mutex
	att  client.ExecAttachResult
	out  *bufio.Reader
	dead bool
}

// shellDone ends each script's output, with the script's status.
const shellDone = "__lockpick_done__"

// OpenShell starts sh (a path in the image) in the running container of name, with its input and
// output attached.
func (s *Session) OpenShell(ctx context.Context, name, sh string) (*Shell, error) {
	att, out, err := s.attach(ctx, name, client.ExecCreateOptions{Cmd: []string{sh}, AttachStdin: true, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return nil, fmt.Errorf("shell: %w", err)
	}
	return &Shell{name: name, att: att, out: out}, nil
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// Run runs script in the shell and returns its output (standard output and error); a status other
// than 0 is an error holding the output. A shell that failed (its container killed, a deadline
// passed) stays failed: Dead reports it, and the caller opens another.
func (sh *Shell) Run(ctx context.Context, script string) (string, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.dead {
		return "", fmt.Errorf("shell in container of %s has ended", sh.name)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	sh.att.Conn.SetDeadline(deadline)
	out, err := sh.run(script)
	// The copy goroutine (attach) reads on between scripts: a deadline left set would end an idle
	// shell, and the next script would read back its timeout.
	sh.att.Conn.SetDeadline(time.Time{})
	if _, failed := err.(scriptError); failed {
		return out, fmt.Errorf("shell in container of %s: %w", sh.name, err)
	}
	if err != nil {
		sh.dead = true
		sh.att.Close()
		return out, fmt.Errorf("shell in container of %s: %w", sh.name, err)
	}
	return out, nil
}

func (sh *Shell) run(script string) (string, error) {
	if _, err := io.WriteString(sh.att.Conn, script+"\necho "+shellDone+" $?\n"); err != nil {
		return "", err
	}
	var out strings.Builder
	for {
		line, err := sh.out.ReadString('\n')
		if err != nil {
			return out.String(), err
		}
		if rest, ok := strings.CutPrefix(line, shellDone+" "); ok {
			status, _ := strconv.Atoi(strings.TrimSpace(rest))
			if status != 0 {
				return out.String(), scriptError{status, strings.TrimSpace(out.String())}
			}
			return out.String(), nil
		}
		out.WriteString(line)
	}
}

// scriptError is a script that ended with a status other than 0: the shell itself is fine.
type scriptError struct {
	status int
	out    string
}

func (e scriptError) Error() string { return fmt.Sprintf("status %d: %s", e.status, e.out) }

// Dead reports whether the shell has ended (a new one is needed).
func (sh *Shell) Dead() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.dead
}

// Close ends the shell.
func (sh *Shell) Close() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.dead {
		sh.dead = true
		sh.att.Close()
	}
}

// OpenNetShell opens a Shell in the network holder of a node's pod.
func (s *Session) OpenNetShell(ctx context.Context, name, sh string) (*Shell, error) {
	return s.OpenShell(ctx, holder(name), sh)
}
