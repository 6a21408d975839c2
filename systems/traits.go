package systems

// Traits are what a topology's servers allow, whatever runs them.
type Traits struct {
	// Peers: the servers talk to each other (replication, sentinels, raft), over paths a fault
	// can cut or slow.
	Peers bool
	// WriteHolds: a node can hold its clients' writes back (redis's CLIENT PAUSE WRITE).
	WriteHolds bool
}
