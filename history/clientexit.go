package history

// A client program that dies without the harness asking (it exits, or a signal it did not get from
// the harness kills it) is recorded as a fault of the nemesis process, as the client-crash nemesis
// records the processes it kills, so that the checker ends the dead process's holds at its death:
//
//   - the death: an invoke and an info completion, both at the moment the harness reaped the
//     program, with F = FExit, Fault = FaultClientExit, Effect = EffectFault, Nodes = ["p<id>"],
//     Value how it ended ("exit status 1", "signal: segmentation fault") and, on the completion,
//     Stderr the end of its log;
//   - its slot going on: an invoke and an info completion with F = FRestart, Fault =
//     FaultClientExit, Effect = EffectHeal and the same Nodes, when the slot's next process has
//     started (or the run's work ended first).
//
// No planned nemesis is called client-exit, so these events never count as the evidence that a
// planned nemesis applied its faults.
const (
	FaultClientExit = "client-exit"
	FExit           = "exit"
	FRestart        = "restart"
)

// Library names the lock library a run tested: the name and version a client program gave in its
// init_ok; for a Go library the harness links in, the library's Go module and the version the
// lockpick binary was built with (go version -m); for a lock built into lockpick, "lockpick NAME"
// and lockpick's revision.
type Library struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Module is the Go module of an adapted Go library (github.com/go-redsync/redsync/v4); empty
	// for client programs and built-in locks.
	Module string `json:"module,omitempty"`
	// Kind is how the run knows: "client program" (its init_ok), "Go module" (the build info) or
	// "built in".
	Kind string `json:"kind"`
	// Notes say where the processes of the run disagreed ("p12 reported redis-py 5.0.1"): the
	// identity above is the one most processes reported.
	Notes []string `json:"notes,omitempty"`
}

// Kinds of Library.
const (
	LibraryProgram = "client program"
	LibraryModule  = "Go module"
	LibraryBuiltIn = "built in"
)

// String is the library in a few words: "redis-py 4.3.4 (client program)".
func (l Library) String() string {
	s := l.Name
	if l.Version != "" {
		s += " " + l.Version
	}
	if l.Module != "" && l.Module != l.Name {
		s += " [" + l.Module + "]"
	}
	if l.Kind != "" {
		s += " (" + l.Kind + ")"
	}
	return s
}
