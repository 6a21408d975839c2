// Package containers runs nodes as Docker containers through the Docker Engine API: a node image
// built offline from the host's own binaries, a private bridge network per run, and containers on
// it that can be killed, restarted, paused and continued.
//
// Everything this package creates carries LabelRun and LabelOwner. A run removes what it created
// when it ends, however it ends short of SIGKILL; what a killed run left behind is removed by Clean,
// which the next run calls and `lockpick clean` offers. Nothing without these labels is ever touched.
package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

// Labels lockpick puts on what it creates.
const (
	// LabelRun names the run a container or network belongs to.
	LabelRun = "dev.lockpick.run"
	// LabelOwner is the lockpick process that created it: host, pid and the process's start time,
	// so a pid the kernel reused is never taken for a live owner.
	LabelOwner = "dev.lockpick.owner"
	// LabelImage marks a node image lockpick built (a cache shared by runs).
	LabelImage = "dev.lockpick.image"
)

// ErrUnreachable means no Docker Engine answered.
var ErrUnreachable = errors.New("docker engine unreachable")

// Engine is a connection to one Docker Engine.
type Engine struct {
	cli  *client.Client
	host string
}

// Connect opens the Engine at host (empty: DOCKER_HOST, else the local socket) and checks that it
// answers, negotiating the API version down to the Engine's.
func Connect(ctx context.Context, host string) (*Engine, error) {
	opts := []client.Opt{client.FromEnv}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w at %s: %v: start the Docker Engine, or point --docker-host (or DOCKER_HOST) at one", ErrUnreachable, cli.DaemonHost(), firstLine(err))
	}
	return &Engine{cli: cli, host: cli.DaemonHost()}, nil
}

// Host is the Engine's address.
func (e *Engine) Host() string { return e.host }

// Local reports whether the Engine runs on this machine (a unix socket), so that containers can
// share the host's files and the host reaches their addresses.
func (e *Engine) Local() bool { return strings.HasPrefix(e.host, "unix://") }

// Close closes the connection.
func (e *Engine) Close() error { return e.cli.Close() }

// Owner is this process as LabelOwner records it.
func Owner() string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + procStart(os.Getpid())
}

// ownerAlive reports whether the lockpick process an owner label names still runs. An owner on
// another host cannot be checked from here and counts as alive.
func ownerAlive(owner string) bool {
	parts := strings.Split(owner, "/")
	if len(parts) != 3 {
		return false // not written by this package's Owner: a broken label owns nothing
	}
	if host, _ := os.Hostname(); parts[0] != host {
		return true
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil {
		return false
	}
	start := procStart(pid)
	return start != "" && start == parts[2]
}

// procStart is a process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or
// empty when no such process runs (a zombie included).
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces and parentheses: count from its closing one.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		// A zombie has died: its parent has not reaped it yet.
		return ""
	}
	return fields[19]
}

// firstLine keeps an error to one line.
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
