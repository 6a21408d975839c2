package containers

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// Stream is a process started in a container with its output (standard output and error) attached,
// read line by line as it writes: a helper that says when it is ready and, as it ends, what it did.
type Stream struct {
	name string
	att  client.ExecAttachResult
	out  *bufio.Reader
}

// StreamNet starts cmd (paths in the image) in the network holder of a node's pod, with its input
// and output attached: its input ends when the Stream is closed or this process dies (its
// connection to the Engine closes), which a helper takes as the word to stop.
func (s *Session) StreamNet(ctx context.Context, name string, cmd []string) (*Stream, error) {
	att, out, err := s.attach(ctx, holder(name), client.ExecCreateOptions{Cmd: cmd, AttachStdin: true, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return nil, err
	}
	return &Stream{name: holder(name), att: att, out: out}, nil
}

// attach starts an exec in the running container of name and reads its output, demultiplexed, as
// one stream.
func (s *Session) attach(ctx context.Context, name string, opts client.ExecCreateOptions) (client.ExecAttachResult, *bufio.Reader, error) {
	id, err := s.id(name)
	if err != nil {
		return client.ExecAttachResult{}, nil, err
	}
	ex, err := s.e.cli.ExecCreate(ctx, id, opts)
	if err != nil {
		return client.ExecAttachResult{}, nil, fmt.Errorf("exec in container of %s: %w", name, err)
	}
	att, err := s.e.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return client.ExecAttachResult{}, nil, fmt.Errorf("exec in container of %s: %w", name, err)
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, pw, att.Reader)
		pw.CloseWithError(cmpErr(err, io.EOF))
	}()
	return att, bufio.NewReader(pr), nil
}

// Line is the process's next line of output, without its newline, waiting until deadline at most;
// io.EOF once it has ended.
func (st *Stream) Line(deadline time.Time) (string, error) {
	st.att.Conn.SetReadDeadline(deadline)
	line, err := st.out.ReadString('\n')
	// The copy goroutine (attach) reads on between calls: a deadline left set would end an idle
	// stream with a timeout that the next call reads back.
	st.att.Conn.SetReadDeadline(time.Time{})
	switch {
	case err == nil, err == io.EOF && line != "": // a last line without its newline is a line
		return strings.TrimRight(line, "\n"), nil
	case err == io.EOF:
		return "", io.EOF
	}
	return "", fmt.Errorf("output of a process in container of %s: %w", st.name, err)
}

// Last is the process's last line of output, read until it ends or deadline passes.
func (st *Stream) Last(deadline time.Time) (string, error) {
	var last string
	for {
		line, err := st.Line(deadline)
		if err == io.EOF {
			return last, nil
		}
		if err != nil {
			return last, err
		}
		last = line
	}
}

// Close ends the process's input and stops reading its output.
func (st *Stream) Close() { st.att.Close() }
