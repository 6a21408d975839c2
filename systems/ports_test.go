package systems

import (
	"errors"
	"strings"
	"testing"
)

func TestStartFailureNamesATakenPort(t *testing.T) {
	taken := StartFailure("n2", "Could not create server TCP listening socket 127.0.0.1:27880: bind: Address already in use")
	if !errors.Is(taken, ErrPortTaken) || !strings.Contains(taken.Error(), "n2") {
		t.Fatalf("a bind failure should be ErrPortTaken and name the node: %v", taken)
	}
	other := StartFailure("n1", "FATAL CONFIG FILE ERROR")
	if errors.Is(other, ErrPortTaken) {
		t.Fatalf("a config error is not a taken port: %v", other)
	}
}
