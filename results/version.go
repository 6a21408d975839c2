package results

// harnessVersion names the lockpick that made a run or a card: its version, or for a record
// written before versions were stamped, its revision.
func harnessVersion(version, revision string) string {
	switch {
	case version != "":
		return version
	case revision == "":
		return "—"
	}
	return "revision " + shortRev(revision)
}
