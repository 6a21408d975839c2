package containers

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/moby/client"
)

// imageRepo is the repository of node images; the tag is a hash of their files.
const imageRepo = "lockpick-node"

// NodeImage returns a node image holding files (absolute host paths: server programs, the clock
// shim) and every shared library ldd lists for them, each at its host path. No registry is needed:
// the image is imported from a tar built here. It is cached by a hash of the files' contents, so an
// unchanged host reuses it and an upgraded binary gets a new one.
func (e *Engine) NodeImage(ctx context.Context, files []string) (string, error) {
	all, err := withLibraries(ctx, files)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range all {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("node image: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
		h.Write(b)
	}
	ref := imageRepo + ":" + hex.EncodeToString(h.Sum(nil))[:16]
	found, err := e.cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("reference", ref)})
	if err != nil {
		return "", fmt.Errorf("list images: %w", err)
	}
	if len(found.Items) > 0 {
		return ref, nil
	}
	var buf bytes.Buffer
	if err := writeTar(&buf, all); err != nil {
		return "", err
	}
	rc, err := e.cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: []string{"LABEL " + LabelImage + "=1"}})
	if err != nil {
		return "", fmt.Errorf("import node image %s: %w", ref, err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return "", fmt.Errorf("import node image %s: %w", ref, err)
	}
	return ref, nil
}

// withLibraries adds to files the shared libraries and the loader ldd names for each, sorted and
// without repeats.
func withLibraries(ctx context.Context, files []string) ([]string, error) {
	set := map[string]bool{}
	for _, f := range files {
		if !filepath.IsAbs(f) {
			return nil, fmt.Errorf("node image: %s is not an absolute path", f)
		}
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("node image: %s is missing on this host: %w", f, err)
		}
		set[f] = true
		out, err := exec.CommandContext(ctx, "ldd", f).CombinedOutput()
		if err != nil && strings.Contains(string(out), "not a dynamic executable") {
			continue // statically linked (a Go program built without cgo): it needs nothing more
		}
		if err != nil {
			return nil, fmt.Errorf("node image: ldd %s: %w (is it a dynamic ELF program, and is ldd installed?)", f, err)
		}
		for _, lib := range lddPaths(string(out)) {
			set[lib] = true
		}
	}
	return slices.Sorted(func(yield func(string) bool) {
		for f := range set {
			if !yield(f) {
				return
			}
		}
	}), nil
}

// lddPaths are the absolute paths in ldd's output: "libc.so.6 => /lib/.../libc.so.6 (0x...)" and
// the loader's "/lib64/ld-linux-x86-64.so.2 (0x...)"; the vdso has none.
func lddPaths(out string) []string {
	var paths []string
	for _, line := range strings.Split(out, "\n") {
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = after
		}
		for _, w := range strings.Fields(line) {
			if strings.HasPrefix(w, "/") {
				paths = append(paths, w)
				break
			}
		}
	}
	return paths
}

// writeTar writes each file's content (symlinks followed) as a regular file at its own path, so
// the image needs no link to resolve: redis-server stays redis-server by name, as Redis needs.
func writeTar(w io.Writer, files []string) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{"tmp": true}
	for _, f := range files {
		for d := filepath.Dir(f); d != "/"; d = filepath.Dir(d) {
			dirs[strings.TrimPrefix(d, "/")] = true
		}
	}
	for _, d := range slices.Sorted(func(yield func(string) bool) {
		for d := range dirs {
			if !yield(d) {
				return
			}
		}
	}) {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode}); err != nil {
			return fmt.Errorf("node image: %w", err)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("node image: %w", err)
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f, "/"), Mode: 0o755, Size: int64(len(b))}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("node image: %w", err)
		}
		if _, err := tw.Write(b); err != nil {
			return fmt.Errorf("node image: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("node image: %w", err)
	}
	return nil
}
