package results

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to path so that a reader, or a run killed mid-write, sees either the
// old file or the whole new one, never a part: see AtomicFile.
func WriteFileAtomic(path string, data []byte) error {
	f, err := CreateAtomic(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return f.Commit()
}

// AtomicFile is a file that appears at its path only when Commit succeeds. It is written as a
// temporary file in the same directory (so the rename cannot cross file systems), synced, renamed
// over the path, and the directory synced, so the new name survives a crash too.
type AtomicFile struct {
	*os.File
	path string
	done bool
}

// CreateAtomic starts a file that will replace path on Commit.
func CreateAtomic(path string) (*AtomicFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return &AtomicFile{File: f, path: path}, nil
}

// Commit syncs the file and renames it over its path.
func (f *AtomicFile) Commit() error {
	name := filepath.Base(f.path)
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.Rename(f.Name(), f.path); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	f.done = true
	return syncDir(filepath.Dir(f.path))
}

// Abort drops the temporary file unless Commit succeeded; it is safe to defer after Commit.
func (f *AtomicFile) Abort() {
	if f.done {
		return
	}
	f.Close()
	os.Remove(f.Name())
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
