package systems

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// unreachableProxy matches what the go command says when it cannot reach the module proxy.
var unreachableProxy = regexp.MustCompile(`dial tcp|no such host|connection refused|i/o timeout|network is unreachable|TLS handshake timeout|proxy\.golang\.org`)

// The current etcd builds from the Go module proxy (or comes from the cache), says its version, and
// three of its members elect a leader. Without the proxy, the test is skipped and says so.
func TestCurrentEtcdBuildsAndServes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds etcd (minutes the first time): not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	srv, err := FindEtcd(ctx, EtcdCurrent, nil)
	if err != nil {
		if unreachableProxy.MatchString(err.Error()) {
			t.Skipf("current etcd not built, the Go module proxy is unreachable: %v", err)
		}
		t.Fatal(err)
	}
	if want := strings.TrimPrefix(EtcdCurrentVersion, "v"); srv.Version != want {
		t.Fatalf("current etcd says version %s, want %s", srv.Version, want)
	}
	s := startEtcdWith(t, srv)
	leader := leaderOf(t, s)
	if err := s.Ping(ctx, leader); err != nil {
		t.Fatalf("leader %s of etcd %s does not answer: %v", leader, srv.Version, err)
	}
}
