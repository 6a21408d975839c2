#!/usr/bin/env bash
# The drive rate at the ceiling (issue 28), beside the previous binary's: BenchmarkCeiling of this
# tree (harness/ceiling_test.go: a bare go-redis loop, the harness with direct clients and the
# harness with a link on every path, in turns, five rounds each) and, when BEFORE is given, the same
# benchmark compiled from the revision BEFORE was built from (its `version` line), run alternately
# REPS times each (default 1) so both meet the same machine. Each line is one benchmark run: its
# medians of operations per second, of the rounds' ratios to the bare loop, and of the CPU
# (user+sys of the Go process: clients, harness, links; not the nodes') per operation in
# microseconds, which the machine's load moves far less than the rates ("-" for a benchmark from
# before it reported CPU).
# SAME_BENCH=1 compiles this tree's harness/ceiling_test.go into BEFORE's harness instead of its own
# (when it still compiles there), so both report the CPU per operation.
# Usage: scripts/bench-ceiling.sh [BEFORE]   -- BEFORE, a lockpick binary built from a commit.
set -euo pipefail
cd "$(dirname "$0")/.."
before=${1:-}
reps=${REPS:-1}
go=${GO:-go}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockpick-bench-ceiling.XXXXXX")
worktree=""
cleanup() {
	[ -n "$worktree" ] && git worktree remove --force "$worktree" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT

"$go" test -c -o "$tmp/after.test" ./harness
tests=(after)
if [ -n "$before" ]; then
	rev=$("$before" version | awk '$1 == "revision" { print $2 }')
	if [ -z "$rev" ] || ! git cat-file -e "$rev^{commit}" 2>/dev/null; then
		echo "bench-ceiling: $before names no commit of this repository (its version has no revision line, or the commit is not here): build BEFORE from a commit with make build" >&2
		exit 255
	fi
	if ! git grep -q BenchmarkCeiling "$rev" -- harness/ceiling_test.go; then
		echo "bench-ceiling: $before's commit ${rev:0:12} has no BenchmarkCeiling: build BEFORE from a later commit" >&2
		exit 255
	fi
	worktree="$tmp/before-tree"
	git worktree add --detach -q "$worktree" "$rev"
	if [ -n "${SAME_BENCH:-}" ]; then
		# The benchmark of this tree on BEFORE's harness: both then report the same measures.
		cp harness/ceiling_test.go "$worktree/harness/ceiling_test.go"
	fi
	(cd "$worktree" && "$go" test -c -o "$tmp/before.test" ./harness)
	tests=(before after)
fi

# run NAME -> one line per lock: NAME LOCK bare direct linked direct/bare linked/bare
run() {
	(cd harness && "$tmp/$1.test" -test.run '^$' -test.bench Ceiling -test.benchtime 1x) >"$tmp/out" 2>&1 || {
		cat "$tmp/out" >&2
		return 1
	}
	awk -v name="$1" '/^BenchmarkCeiling\// {
		lock = $1; sub(/^BenchmarkCeiling\//, "", lock); sub(/-[0-9]+$/, "", lock)
		for (i = 3; i < NF; i += 2) v[$(i + 1)] = $i
		for (k in cpu) delete cpu[k]
		split("bare-cpu-us/op harness-cpu-us/op linked-cpu-us/op", names, " ")
		for (k = 1; k <= 3; k++) cpu[k] = (names[k] in v) ? sprintf("%.1f", v[names[k]]) : "-"
		printf "%-7s %-8s %9s %9s %9s %7s %7s %7s %7s %7s\n", name, lock, v["bare-ops/s"], v["harness-ops/s"], v["linked-ops/s"], v["harness/bare"], v["linked/bare"], cpu[1], cpu[2], cpu[3]
		delete v
	}' "$tmp/out"
}

printf "%-7s %-8s %9s %9s %9s %7s %7s %7s %7s %7s\n" binary lock bare direct linked direct linked bare-us direct-us linked-us
for _ in $(seq "$reps"); do
	for t in "${tests[@]}"; do
		run "$t"
	done
done
