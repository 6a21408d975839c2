// Package sshhost reaches one machine over SSH, as the SSH backend's runner needs it: commands
// with their output and exit status, files uploaded, processes started detached under a directory
// of the run's, all over one multiplexed connection per host. A host key is checked against a
// known_hosts file or a pinned fingerprint, never accepted unseen.
package sshhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Config says how to reach and trust one host.
type Config struct {
	// Addr is host or host:port (port 22 by default).
	Addr string
	User string
	// KeyFile is the private key to log in with (no passphrase: the harness runs unattended).
	KeyFile string
	// KnownHosts is a known_hosts file that must list the host's key; Fingerprint, when set instead,
	// is the host key's SHA256 fingerprint as ssh-keygen -l prints it ("SHA256:...").
	KnownHosts  string
	Fingerprint string
	// Timeout bounds the connection and login; 10 s when zero.
	Timeout time.Duration
}

// Host is a logged-in SSH connection to one machine. Its methods may be called concurrently: each
// command is a session of its own on the one connection.
type Host struct {
	addr   string
	client *ssh.Client
	pool   *shells
}

// Dial connects and logs in.
func Dial(ctx context.Context, cfg Config) (*Host, error) {
	addr := cfg.Addr
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "22")
	}
	auth, err := keyAuth(cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	check, err := hostKeyCheck(cfg)
	if err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	cc := &ssh.ClientConfig{User: cfg.User, Auth: []ssh.AuthMethod{auth}, HostKeyCallback: check, Timeout: timeout}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", addr, err)
	}
	conn.SetDeadline(time.Now().Add(timeout))
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cc)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ssh %s@%s: %w", cfg.User, addr, err)
	}
	conn.SetDeadline(time.Time{})
	return &Host{addr: addr, client: ssh.NewClient(c, chans, reqs), pool: &shells{slots: make(chan struct{}, maxShells)}}, nil
}

func keyAuth(file string) (ssh.AuthMethod, error) {
	if file == "" {
		return nil, errors.New("no SSH key: give the private key to log in with (--ssh-key FILE)")
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read SSH key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, fmt.Errorf("SSH key %s: %w (a key with a passphrase cannot log in unattended: give lockpick a key of its own without one)", file, err)
	}
	return ssh.PublicKeys(signer), nil
}

// hostKeyCheck trusts the host's key only as known_hosts or the pinned fingerprint says.
func hostKeyCheck(cfg Config) (ssh.HostKeyCallback, error) {
	switch {
	case cfg.Fingerprint != "":
		want := cfg.Fingerprint
		return func(host string, _ net.Addr, key ssh.PublicKey) error {
			if got := ssh.FingerprintSHA256(key); got != want {
				return fmt.Errorf("host key of %s is %s, not the pinned %s: a different machine answers, or its key changed", host, got, want)
			}
			return nil
		}, nil
	case cfg.KnownHosts != "":
		check, err := knownhosts.New(cfg.KnownHosts)
		if err != nil {
			return nil, fmt.Errorf("known hosts: %w", err)
		}
		return func(host string, remote net.Addr, key ssh.PublicKey) error {
			err := check(host, remote, key)
			var ke *knownhosts.KeyError
			if errors.As(err, &ke) && len(ke.Want) == 0 {
				return fmt.Errorf("%s is not in %s: add its key (ssh-keyscan %s >> %s, after checking it) or pin its fingerprint", host, cfg.KnownHosts, strings.TrimSuffix(host, ":22"), cfg.KnownHosts)
			}
			return err
		}, nil
	}
	return nil, errors.New("no way to check host keys: give a known_hosts file (--ssh-known-hosts, default ~/.ssh/known_hosts) or a pinned fingerprint")
}

// Addr is the host's address, host:port.
func (h *Host) Addr() string { return h.addr }

// LocalIP is this machine's address on the connection to the host: where the host sees the
// harness and its clients come from.
func (h *Host) LocalIP() string {
	if a, ok := h.client.LocalAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, _ := net.SplitHostPort(h.client.LocalAddr().String())
	return host
}

// Close ends the connection; processes started with Start keep running.
func (h *Host) Close() error { return h.client.Close() }

// Run runs a shell command and returns its standard output. A non-zero exit is an error that
// carries the exit status and the end of standard error. ctx ends the session, not the command.
func (h *Host) Run(ctx context.Context, cmd string) ([]byte, error) {
	return h.run(ctx, cmd, nil)
}

func (h *Host) run(ctx context.Context, cmd string, stdin io.Reader) ([]byte, error) {
	s, err := h.client.NewSession()
	if err != nil {
		return nil, fmt.Errorf("ssh %s: new session: %w", h.addr, err)
	}
	defer s.Close()
	var out, errOut bytes.Buffer
	s.Stdout, s.Stderr, s.Stdin = &out, &errOut, stdin
	done := make(chan error, 1)
	go func() { done <- s.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		s.Close()
		return nil, fmt.Errorf("ssh %s: %s: %w", h.addr, short(cmd), ctx.Err())
	}
	if err != nil {
		return out.Bytes(), fmt.Errorf("ssh %s: %s: %w%s", h.addr, short(cmd), err, tail(errOut.String()))
	}
	return out.Bytes(), nil
}

// Upload writes data to path with mode, atomically (a temporary file renamed into place).
func (h *Host) Upload(ctx context.Context, path string, mode os.FileMode, data io.Reader) error {
	tmp := path + ".lockpick-upload"
	cmd := fmt.Sprintf("umask 077 && cat > %s && chmod %o %s && mv -f %s %s", Quote(tmp), mode.Perm(), Quote(tmp), Quote(tmp), Quote(path))
	_, err := h.run(ctx, cmd, data)
	return err
}

// Start starts argv detached from the session, in its own session and process group, in dir, with
// its output appended to logFile, and returns its process id. The process outlives the connection:
// the caller stops it (Signal, or Run with kill).
func (h *Host) Start(ctx context.Context, dir, logFile string, env []string, argv []string) (int, error) {
	if len(argv) == 0 {
		return 0, errors.New("start: no program")
	}
	var b strings.Builder
	// setsid gives the program a session of its own, so the end of this SSH session sends it no
	// SIGHUP; env sets its variables (a quoted NAME=VALUE is no assignment to the shell); $! is its pid.
	// The braces keep & to the program alone: a backgrounded "cd && program" list would be a subshell
	// holding the session's output open, and $! its pid.
	fmt.Fprintf(&b, "cd %s && { setsid env ", Quote(dir))
	for _, a := range append(env, argv...) {
		b.WriteString(Quote(a) + " ")
	}
	fmt.Fprintf(&b, ">>%s 2>&1 </dev/null & echo $!; }", Quote(logFile))
	out, err := h.Sh(ctx, b.String())
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, fmt.Errorf("ssh %s: start %s: no pid in %q", h.addr, argv[0], out)
	}
	return pid, nil
}

// Signal sends sig (a name such as KILL, STOP, CONT) to pid.
func (h *Host) Signal(ctx context.Context, pid int, sig string) error {
	_, err := h.Sh(ctx, fmt.Sprintf("kill -%s %d", Quote(sig), pid))
	return err
}

// Alive reports whether pid runs (a stopped process counts; a zombie does not).
func (h *Host) Alive(ctx context.Context, pid int) (bool, error) {
	out, err := h.Sh(ctx, fmt.Sprintf("ps -o stat= -p %d || true", pid))
	if err != nil {
		return false, err
	}
	st := strings.TrimSpace(string(out))
	return st != "" && !strings.HasPrefix(st, "Z"), nil
}

// Quote makes s one word of a POSIX shell command.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func short(cmd string) string {
	if len(cmd) > 60 {
		return cmd[:57] + "..."
	}
	return cmd
}

func tail(stderr string) string {
	stderr = strings.TrimSpace(stderr)
	if stderr == "" {
		return ""
	}
	if len(stderr) > 300 {
		stderr = "..." + stderr[len(stderr)-300:]
	}
	return ": " + stderr
}
