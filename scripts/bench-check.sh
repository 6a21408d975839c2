#!/usr/bin/env bash
# Check-from-disk benchmark (issue 15): generates histories of 100k, 1M and 10M operations
# (checker.Generate, written by checker/internal/genhistory) in a temporary directory, runs
# `lockpick check FILE` on each under /usr/bin/time -v, and prints wall time, CPU and peak RSS.
# Usage: scripts/bench-check.sh LOCKPICK [BEFORE]   -- BEFORE, another lockpick binary, is run on
# the same files in the same run, so the table compares the two on equal terms (a noisy machine).
# SIZES overrides the sizes, e.g. SIZES="100000 1000000".
set -euo pipefail
after=${1:?usage: bench-check.sh LOCKPICK [BEFORE]}
before=${2:-}
sizes=${SIZES:-100000 1000000 10000000}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockpick-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/genhistory" ./checker/internal/genhistory

measure() { # binary file -> "seconds user-seconds peak-MiB exit sha"
	local out rc
	set +e
	/usr/bin/time -v "$1" check "$2" >"$tmp/out" 2>"$tmp/time"
	rc=$?
	set -e
	awk -v rc="$rc" -v sum="$(sed 's/checked in [^)]*//' "$tmp/out" | sha256sum | cut -c1-12)" '
		/Elapsed \(wall clock\)/ { n = split($NF, t, ":"); s = (n == 3) ? t[1]*3600 + t[2]*60 + t[3] : t[1]*60 + t[2] }
		/User time/ { u = $NF }
		/Maximum resident/ { m = $NF / 1024 }
		END { printf "%8.2f %8.2f %9.0f %5s %s", s, u, m, rc, sum }' "$tmp/time"
}

printf "%-9s %-7s %8s %8s %9s %5s %s\n" ops binary wall-s user-s peak-MiB exit verdict-sha
for n in $sizes; do
	"$tmp/genhistory" -ops "$n" -o "$tmp/h.jsonl"
	mib=$(( $(stat -c %s "$tmp/h.jsonl") >> 20 ))
	[ -n "$before" ] && printf "%-9s %-7s %s\n" "$n" before "$(measure "$before" "$tmp/h.jsonl")"
	printf "%-9s %-7s %s   (file %d MiB)\n" "$n" after "$(measure "$after" "$tmp/h.jsonl")" "$mib"
	rm -f "$tmp/h.jsonl"
done
