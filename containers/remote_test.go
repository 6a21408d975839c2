package containers

import (
	"testing"
)

// Nodes reached on loopback are published on that address only; anything else may be an address
// the Engine host does not know it has, so every address.
func TestBindFor(t *testing.T) {
	for host, want := range map[string]string{
		"127.0.0.1": "127.0.0.1", "::1": "::1", "10.0.0.5": "0.0.0.0", "docker.example": "0.0.0.0", "": "0.0.0.0",
	} {
		if got := BindFor(host).String(); got != want {
			t.Errorf("BindFor(%q) = %s, want %s", host, got, want)
		}
	}
}

func TestPublishHostAndLocal(t *testing.T) {
	for host, want := range map[string]string{
		"tcp://10.0.0.5:2376": "10.0.0.5", "tcp://127.0.0.1:23750": "127.0.0.1", "tcp://[::1]:2375": "::1",
	} {
		e := &Engine{host: host}
		got, err := e.PublishHost()
		if err != nil || got != want {
			t.Errorf("PublishHost of %s = %q, %v; want %q", host, got, err, want)
		}
		if e.Local() || IsLocalHost(host) {
			t.Errorf("an Engine at %s is taken for a local one", host)
		}
	}
	if _, err := (&Engine{host: "unix:///var/run/docker.sock"}).PublishHost(); err == nil {
		t.Error("a unix socket names no host to reach published ports at, and PublishHost said it does")
	}
	if !IsLocalHost("unix:///var/run/docker.sock") {
		t.Error("a unix socket is not taken for a local Engine")
	}
}
