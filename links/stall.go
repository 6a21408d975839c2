package links

// StallLatency is the delay of a stall: far beyond any run, so nothing gets through until the stall
// is removed.
const StallLatency = 24 * 3600 * 1000 // milliseconds

// Stall is the pair of toxics that hold back everything on a link, both ways, until they are
// removed, and then deliver it: a partition as TCP lives through it, with nothing lost and nothing
// reset. Cutting a replication link this way keeps the replica believing it is connected (as it
// would over a network that silently stopped), and drops no bytes from the middle of the
// replication stream, which no real network does to a live TCP connection.
func Stall(name string) []Toxic {
	t := func(stream string) Toxic {
		return Toxic{Name: name + "-" + stream, Type: "latency", Stream: stream, Attributes: map[string]any{"latency": StallLatency}}
	}
	return []Toxic{t("upstream"), t("downstream")}
}
