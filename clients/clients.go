// Package clients holds the lock client programs shipped with lockpick (Python and PHP drivers of
// third-party lock libraries, speaking the client protocol), embedded so that the binary carries
// them wherever it runs.
package clients

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

//go:embed python/*.py php/*.php java/*.java
var files embed.FS

// Install writes the shipped client file name (for example "python/redis_lock.py") under dir,
// unless the same file is there already, and returns its path. Concurrent calls are safe: the file
// is written under a temporary name and renamed.
func Install(dir, name string) (string, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("no shipped client %s", name)
	}
	path := filepath.Join(dir, filepath.FromSlash(name))
	if old, err := os.ReadFile(path); err == nil && string(old) == string(b) {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("install client %s: %w", name, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".install-*")
	if err != nil {
		return "", fmt.Errorf("install client %s: %w", name, err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("install client %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("install client %s: %w", name, err)
	}
	return path, nil
}
