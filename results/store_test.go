package results

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestNewRunDirIsUniqueAndLatestFollows(t *testing.T) {
	store := t.TempDir()
	now := time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC)
	a, err := NewRunDir(store, "redlock-restart", now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewRunDir(store, "redlock-restart", now)
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("two runs at the same instant share a directory")
	}
	if !strings.HasPrefix(a, filepath.Join(store, "redlock-restart", "20261121T110000.000Z")) {
		t.Fatalf("unexpected run directory %s", a)
	}
	for _, dir := range []string{a, b} {
		if err := LinkLatest(store, dir); err != nil {
			t.Fatal(err)
		}
		got, err := filepath.EvalSymlinks(filepath.Join(store, "latest"))
		if err != nil || got != dir {
			t.Fatalf("latest -> %q (%v), want %q", got, err, dir)
		}
	}
}

func TestUnwritableStoreNamesTheFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	_, err := NewRunDir(filepath.Join(file, "store"), "x", time.Now())
	if err == nil || !strings.Contains(err.Error(), "--store") {
		t.Fatalf("want an error naming --store, got %v", err)
	}
}

// An atomic write leaves the old file whole until the new one is complete, and no temporary file
// behind.
func TestWriteFileAtomicReplacesWholeFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, SummaryFile)
	if err := WriteFileAtomic(path, []byte("old\n")); err != nil {
		t.Fatal(err)
	}
	f, err := CreateAtomic(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new, half written")
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Fatalf("a write in progress shows through: %q", b)
	}
	f.Abort()
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Fatalf("an aborted write changed the file: %q", b)
	}
	if err := WriteFileAtomic(path, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new\n" {
		t.Fatalf("got %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", fi.Mode().Perm())
	}
}

// A file that cannot be written after the verdict names the fix for its cause.
func TestWriteFixNamesTheFix(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, "free space under the store or choose another --store"},
		{fmt.Errorf("write summary.txt: %w", &os.PathError{Op: "open", Path: "x", Err: syscall.EACCES}), "make the store writable or choose another --store"},
		{&os.PathError{Op: "open", Path: "x", Err: syscall.EROFS}, "make the store writable or choose another --store"},
		{errors.New("write report: something else"), "choose another --store"},
	} {
		if got := WriteFix(c.err); got != c.want {
			t.Errorf("%v: fix %q, want %q", c.err, got, c.want)
		}
	}
}
