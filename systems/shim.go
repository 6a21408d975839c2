package systems

import (
	"context"
	"crypto/sha256"
	_ "embed" // the clock shim's C source
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// ShimName is the file name of the built clock shim, as `make shim` writes it into bin/.
const ShimName = "libclockshim.so"

// ClockFileEnv names the environment variable that tells the shim where its offset file is.
const ClockFileEnv = "LOCKPICK_CLOCK_FILE"

// shimSource is compiled when no prebuilt shim is at hand, so a `go build` alone is enough.
//
//go:embed clockshim/clockshim.c
var shimSource []byte

// ErrNoCompiler means the clock shim must be built and no C compiler was found.
var ErrNoCompiler = errors.New("the clock nemesis needs a C compiler to build its LD_PRELOAD shim and found neither cc nor gcc: install one with `apt-get install gcc` (or run `make shim` and pass --clock-shim bin/" + ShimName + ")")

// FindClockShim returns the path of a usable clock shim: path when given; else libclockshim.so
// beside the running executable (where `make build` puts it); else one compiled from the embedded
// source into cacheDir (empty means the user cache directory), keyed by the source's hash so a
// changed shim is rebuilt.
func FindClockShim(ctx context.Context, path, cacheDir string) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("clock shim: %w", err)
		}
		return filepath.Abs(path)
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), ShimName)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return BuildClockShim(ctx, cacheDir)
}

// BuildClockShim compiles the embedded shim into cacheDir unless that exact source is already built.
func BuildClockShim(ctx context.Context, cacheDir string) (string, error) {
	if cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cacheDir = filepath.Join(base, "lockpick")
	}
	sum := sha256.Sum256(shimSource)
	out := filepath.Join(cacheDir, "clockshim-"+hex.EncodeToString(sum[:8])+".so")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	cc := ""
	for _, name := range []string{os.Getenv("CC"), "cc", "gcc"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			cc = p
			break
		}
	}
	if cc == "" {
		return "", ErrNoCompiler
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("clock shim cache: %w", err)
	}
	src := filepath.Join(cacheDir, fmt.Sprintf("clockshim-%d.c", os.Getpid()))
	if err := os.WriteFile(src, shimSource, 0o644); err != nil {
		return "", fmt.Errorf("clock shim: %w", err)
	}
	defer os.Remove(src)
	// Build under a temporary name and rename: concurrent runs never load a half-written library.
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, cc, "-shared", "-fPIC", "-O2", "-o", tmp, src)
	if msg, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build clock shim with %s: %w: %s", cc, err, msg)
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("clock shim: %w", err)
	}
	return out, nil
}
