package results

import (
	"os"
	"path/filepath"
	"strings"
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
