package systems

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Etcd server choices besides a path.
const (
	// EtcdSystem is the etcd on PATH: Debian's etcd-server (3.4.23, end of life, without the later
	// lease fixes).
	EtcdSystem = "system"
	// EtcdCurrent is a current etcd (EtcdCurrentVersion), built from the Go module proxy once and
	// kept in the user's cache.
	EtcdCurrent = "current"
	// EtcdCurrentVersion is the etcd that EtcdCurrent builds.
	EtcdCurrentVersion = "v3.7.3"
)

// EtcdServer is the etcd program a run uses and the version it reports.
type EtcdServer struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// FindEtcd resolves --etcd-server: "system" (or empty) is etcd on PATH, "current" builds
// EtcdCurrentVersion with the go command into the user cache (minutes, once), anything else is a
// path to an etcd program.
func FindEtcd(ctx context.Context, spec string, log *slog.Logger) (EtcdServer, error) {
	var path string
	switch spec {
	case "", EtcdSystem:
		p, err := exec.LookPath("etcd")
		if err != nil {
			return EtcdServer{}, errors.New("no etcd on PATH: install Debian's etcd-server (apt-get install etcd-server, or make deps), or use --etcd-server current to build a current etcd")
		}
		path = p
	case EtcdCurrent:
		p, err := buildCurrentEtcd(ctx, log)
		if err != nil {
			return EtcdServer{}, err
		}
		path = p
	default:
		p, err := filepath.Abs(spec)
		if err != nil {
			return EtcdServer{}, fmt.Errorf("--etcd-server %s: %w", spec, err)
		}
		path = p
	}
	v, err := etcdVersion(ctx, path)
	if err != nil {
		return EtcdServer{}, fmt.Errorf("--etcd-server %s: %w: give the path of an etcd server program, %q or %q", spec, err, EtcdSystem, EtcdCurrent)
	}
	return EtcdServer{Path: path, Version: v}, nil
}

var etcdVersionLine = regexp.MustCompile(`etcd Version: (\S+)`)

func etcdVersion(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	m := etcdVersionLine.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s --version printed no etcd version", path)
	}
	return string(m[1]), nil
}

// CurrentEtcdPath is where the current etcd is kept once built.
func CurrentEtcdPath() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache for the etcd build: %w", err)
	}
	return filepath.Join(cache, "lockpick", "etcd-"+EtcdCurrentVersion, "etcd"), nil
}

// buildCurrentEtcd builds the current etcd server unless the cache has it. The build runs in a
// module of its own in a temporary directory, so the project's module is never touched.
func buildCurrentEtcd(ctx context.Context, log *slog.Logger) (string, error) {
	dest, err := CurrentEtcdPath()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(dest); err == nil {
		return dest, nil
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("--etcd-server current builds etcd %s with the go command, which is not on PATH: install Go or use --etcd-server system", EtcdCurrentVersion)
	}
	tmp, err := os.MkdirTemp("", "lockpick-etcd-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "go.mod"), []byte("module lockpick-etcd-build\n\ngo 1.26\n"), 0o644); err != nil {
		return "", err
	}
	if log != nil {
		log.Info("building etcd from the Go module proxy (a few minutes, once)", "version", EtcdCurrentVersion, "into", dest)
	}
	fmt.Fprintf(os.Stderr, "building etcd %s from the Go module proxy into %s (a few minutes, once)\n", EtcdCurrentVersion, dest)
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return "", err
	}
	// A part file of this process's own: two runs building at once each rename a whole program.
	part := fmt.Sprintf("%s.part%d", dest, os.Getpid())
	defer os.Remove(part)
	for _, args := range [][]string{
		{"get", "go.etcd.io/etcd/server/v3@" + EtcdCurrentVersion},
		{"build", "-o", part, "go.etcd.io/etcd/server/v3"},
	} {
		cmd := exec.CommandContext(ctx, gobin, args...)
		cmd.Dir = tmp
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("build etcd %s (go %s): %w: %s; the Go module proxy must be reachable, or use --etcd-server system",
				EtcdCurrentVersion, args[0], err, lastOf(string(out), 3))
		}
	}
	if err := os.Rename(part, dest); err != nil {
		return "", err
	}
	return dest, nil
}

func lastOf(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
