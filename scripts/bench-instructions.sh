#!/usr/bin/env bash
# The check's work in instructions (issue 28): what `lockpick check FILE` and `lockpick check RUNDIR`
# execute on a generated history, counted by valgrind's callgrind, beside BEFORE's. Unlike seconds,
# the count does not move with the machine's speed, which on a shared host swings 1.6 times within
# minutes: it is the figure to compare two builds by. The Go runtime is held still for it:
# GOMAXPROCS=1, GOGC=off (the work, not the collector's timing) and no asynchronous preemption
# (callgrind stops on the signals it sends). The history and run directory are those of
# scripts/bench-check.sh.
# Usage: scripts/bench-instructions.sh LOCKPICK [BEFORE]   -- SIZES overrides the sizes (default
# 100000; a million operations take about three minutes a count).
set -euo pipefail
after=${1:?usage: bench-instructions.sh LOCKPICK [BEFORE]}
before=${2:-}
sizes=${SIZES:-100000}
command -v valgrind >/dev/null || {
	echo "bench-instructions: valgrind not found: install it with apt-get install valgrind" >&2
	exit 255
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockpick-bench-instr.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/genhistory" ./checker/internal/genhistory
config='{"name": "bench", "lock": "single", "nemesis": "restart", "workload": "mutex",
 "system": "redis-masters", "nodes": 3, "clients": 10, "keys": 1, "ttl": "100ms", "seed": 1}'

# count BINARY TARGET -> the instructions callgrind collected
count() {
	GODEBUG=asyncpreemptoff=1 GOGC=off GOMAXPROCS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$1" check "$2" 2>&1 >/dev/null | awk '/Collected :/ { print $NF }'
}

printf "%-9s %-5s %15s %15s %7s\n" ops check before after ratio
for n in $sizes; do
	"$tmp/genhistory" -ops "$n" -o "$tmp/h.jsonl"
	mkdir -p "$tmp/run"
	ln -f "$tmp/h.jsonl" "$tmp/run/history.jsonl"
	echo "$config" >"$tmp/run/config.json"
	for t in file dir; do
		target=$tmp/h.jsonl
		[ "$t" = dir ] && target=$tmp/run
		a=$(count "$after" "$target")
		b=-
		[ -n "$before" ] && b=$(count "$before" "$target")
		awk -v n="$n" -v t="$t" -v a="$a" -v b="$b" 'BEGIN {
			r = (b == "-") ? "-" : sprintf("%.3f", a / b)
			printf "%-9s %-5s %15s %15s %7s\n", n, t, b, a, r }'
	done
	rm -rf "$tmp/h.jsonl" "$tmp/run"
done
