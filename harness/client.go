package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/nemesis"
	"github.com/lockpick-dev/lockpick/systems"
)

// resolveClient checks --client-cmd and --client-capabilities against --lock: they belong to --lock
// client, which needs a command. The program is found now (a relative path from the current
// directory, a bare name on PATH) and stored with an absolute path, so that the stored config
// reruns from anywhere.
func (c *Config) resolveClient() error {
	if k, err := locks.Lookup(c.Lock); err != nil || !k.User {
		if len(c.ClientCmd) > 0 || len(c.ClientCaps) > 0 {
			return fmt.Errorf("--client-cmd and --client-capabilities belong to --lock client, not --lock %s: drop them", c.Lock)
		}
		return nil
	}
	if len(c.ClientCmd) == 0 || c.ClientCmd[0] == "" {
		return fmt.Errorf("--lock client needs the program to run: add --client-cmd 'PROGRAM ARGS' (see docs/protocol.md)")
	}
	prog := c.ClientCmd[0]
	var err error
	if strings.ContainsRune(prog, '/') {
		if prog, err = filepath.Abs(prog); err == nil {
			_, err = os.Stat(prog)
		}
	} else {
		prog, err = exec.LookPath(prog)
	}
	if err != nil {
		return fmt.Errorf("--client-cmd: cannot run %q: %v: give a path to the program (for example ./myclient.py) or a name on PATH", c.ClientCmd[0], err)
	}
	c.ClientCmd = append([]string{prog}, c.ClientCmd[1:]...)
	for _, cp := range c.ClientCaps {
		if !slices.Contains(locks.ClientCapabilities, cp) {
			return fmt.Errorf("--client-capabilities: unknown capability %q: use some of %v", cp, locks.ClientCapabilities)
		}
	}
	return nil
}

// kind is the lock's kind, with the capabilities the user declared for --lock client.
func (c *Config) kind() (locks.Kind, error) {
	k, err := locks.Lookup(c.Lock)
	if err != nil || !k.User {
		return k, err
	}
	return locks.WithCapabilities(k, c.ClientCaps), nil
}

// clientShim is the clock shim loaded into client programs: only when the lock is a client program
// and a client-clock nemesis moves their clocks.
func (c *Config) clientShim(ctx context.Context) (string, error) {
	k, err := c.kind()
	f, moves := c.faultNeeding(nemesis.ClientClockShifts)
	if err != nil || !k.Program || !moves {
		return "", err
	}
	shim, err := systems.FindClockShim(ctx, c.ClockShim, "")
	if err != nil {
		return "", fmt.Errorf("--nemesis %s: %w", f.Name(), err)
	}
	return shim, nil
}
