package locks

import (
	"runtime/debug"
	"testing"

	"github.com/lockpick-dev/lockpick/history"
)

// The module of an adapted package is the longest dependency path that contains it, at the version
// built in (a replacement's, when replaced); a package the build info does not list is unknown.
func TestModuleOf(t *testing.T) {
	deps := []*debug.Module{
		{Path: "go.etcd.io/etcd/client/pkg/v3", Version: "v3.7.3"},
		{Path: "go.etcd.io/etcd/client/v3", Version: "v3.7.3"},
		{Path: "github.com/redis/rueidis", Version: "v1.0.79"},
		{Path: "github.com/zeromicro/go-zero", Version: "v1.10.3", Replace: &debug.Module{Path: "../go-zero", Version: "v1.10.4-fix"}},
	}
	for pkg, want := range map[string][2]string{
		"go.etcd.io/etcd/client/v3/concurrency":          {"go.etcd.io/etcd/client/v3", "v3.7.3"},
		"github.com/redis/rueidis/rueidislock":           {"github.com/redis/rueidis", "v1.0.79"},
		"github.com/zeromicro/go-zero/core/stores/redis": {"github.com/zeromicro/go-zero", "v1.10.4-fix (replaces v1.10.3)"},
		"github.com/redis/rueidisx":                      {"github.com/redis/rueidisx", unknownVersion},
	} {
		if m, v := moduleOf(pkg, deps); m != want[0] || v != want[1] {
			t.Errorf("%s: module %s %s, want %s %s", pkg, m, v, want[0], want[1])
		}
	}
}

// A Go library adapter is a Go module; a built-in lock names lockpick at its revision; a client
// program names itself later, in its init_ok.
func TestLibraryOf(t *testing.T) {
	for name, want := range map[string]history.Library{
		"redsync":  {Kind: history.LibraryModule},
		"etcd":     {Kind: history.LibraryModule},
		"single":   {Name: "lockpick single", Version: "abc123", Kind: history.LibraryBuiltIn},
		"py-redis": {},
	} {
		k, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		got := LibraryOf(k, "abc123")
		if got.Kind != want.Kind || want.Name != "" && (got.Name != want.Name || got.Version != want.Version) || got.Kind == history.LibraryModule && got.Module == "" {
			t.Errorf("%s: library %+v, want %+v", name, got, want)
		}
	}
}
