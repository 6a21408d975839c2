package locks

import (
	"runtime/debug"
	"strings"

	"github.com/lockpick-dev/lockpick/history"
)

// Death is a client program that died without the harness asking: it exited, or a signal the
// harness did not send killed it, after it had answered init. It is a finding about the lock's
// client (docs/protocol.md), not a broken run.
type Death struct {
	// Process is the process id the program ran as.
	Process int
	// Exit is how it ended, as the operating system says it ("exit status 1", "signal: segmentation
	// fault (core dumped)").
	Exit string
	// Stderr is the end of its stderr, on one line, with the path of its log.
	Stderr string
}

// Mortal is a client that can die by itself, as a client program can. OnDeath registers f, called
// once when it dies (at once if it has already died), before any request in flight returns; from
// then on every request fails with an indeterminate error. Died returns the death, or nil.
type Mortal interface {
	OnDeath(f func(Death))
	Died() *Death
}

// Identified is a client that names the library it runs: a client program, by its init_ok.
type Identified interface {
	Library() history.Library
}

// LibraryOf is the library a lock of kind k runs, as far as the kind alone knows it: a Go library
// adapter's module and the version this binary was built with (its build info, as go version -m
// shows it), or lockpick itself at revision for a built-in lock. A client program names itself in
// its init_ok (Identified): for those the result is zero.
func LibraryOf(k Kind, revision string) history.Library {
	switch {
	case k.Program:
		return history.Library{}
	case k.Library != "":
		mod, version := buildModule(k.Library)
		return history.Library{Name: mod, Version: version, Module: mod, Kind: history.LibraryModule}
	}
	if revision == "" {
		revision = "(unknown revision)"
	}
	return history.Library{Name: "lockpick " + k.Name, Version: revision, Kind: history.LibraryBuiltIn}
}

// buildModule finds the module that provides package pkg in this binary's build info (go test
// binaries carry none: the version is then unknown).
func buildModule(pkg string) (module, version string) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return pkg, unknownVersion
	}
	return moduleOf(pkg, info.Deps)
}

// unknownVersion is the version of a library the build info does not list.
const unknownVersion = "(unknown: this binary carries no build info for it)"

// moduleOf is the dependency among deps that provides package pkg: the one with the longest path
// that is pkg or a prefix of it. A replaced module reports its replacement's version.
func moduleOf(pkg string, deps []*debug.Module) (module, version string) {
	module, version = pkg, unknownVersion
	best := -1
	for _, d := range deps {
		if (d.Path == pkg || strings.HasPrefix(pkg, d.Path+"/")) && len(d.Path) > best {
			best, module, version = len(d.Path), d.Path, d.Version
			if d.Replace != nil {
				version = d.Replace.Version + " (replaces " + d.Version + ")"
			}
		}
	}
	return module, version
}
