#!/usr/bin/env bash
# Check-from-disk benchmark (issues 15 and 28): what users wait for. Generates histories of 100k, 1M
# and 10M operations (checker.Generate, written by checker/internal/genhistory) in a temporary
# directory and times, under /usr/bin/time -v:
#   file  `lockpick check FILE`   the verdict only;
#   dir   `lockpick check RUNDIR` what `check store/latest` and the end of every `lockpick run` do:
#         the verdict, results.json, summary.txt, the visualization, report.html and its plots. The
#         run directory is the history with the config.json a real run has (10 clients, 1 key).
# Usage: scripts/bench-check.sh LOCKPICK [BEFORE]   -- BEFORE, another lockpick binary, runs on the
# same files in the same run, alternating with LOCKPICK, so the two compare on equal terms on a
# noisy machine. Each figure is the median of REPS runs (default 3): wall seconds, CPU seconds
# (user+sys), peak RSS. The verdict hash is of the output (file) or of summary.txt and results.json
# (dir), timing lines and the directory's name left out: it must be the same for both binaries.
# SIZES overrides the sizes, e.g. SIZES="100000 1000000"; REPS the repetitions. OVERLAPS=N makes
# the history invalid all through: after every N events, an acquire refused as held is granted
# (genhistory -overlaps), so the check folds past findings (checker/foldfindings.go).
set -euo pipefail
after=${1:?usage: bench-check.sh LOCKPICK [BEFORE]}
before=${2:-}
sizes=${SIZES:-100000 1000000 10000000}
reps=${REPS:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockpick-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/genhistory" ./checker/internal/genhistory

# verdict DIR|"" OUT -> the hash of what check decided, without timings
verdict() {
	if [ -n "$1" ]; then
		cat "$1/summary.txt" "$1/results.json"
	else
		cat "$2"
	fi | sed -e 's/checked in [^),]*//' -e '/"check_duration"/d' -e '/"dir":/d' | sha256sum | cut -c1-12
}

# measure BINARY TARGET DIR|"" -> "wall cpu peak-MiB exit sha"
measure() {
	local rc
	set +e
	/usr/bin/time -v "$1" check "$2" >"$tmp/out" 2>"$tmp/time"
	rc=$?
	set -e
	awk -v rc="$rc" -v sum="$(verdict "$3" "$tmp/out")" '
		/Elapsed \(wall clock\)/ { n = split($NF, t, ":"); s = (n == 3) ? t[1]*3600 + t[2]*60 + t[3] : t[1]*60 + t[2] }
		/User time/ { u = $NF }
		/System time/ { y = $NF }
		/Maximum resident/ { m = $NF / 1024 }
		END { printf "%.2f %.2f %.0f %s %s\n", s, u + y, m, rc, sum }' "$tmp/time"
}

# median FILE -> the median of each numeric column of FILE's lines, the last line's exit and hash
median() {
	local n
	n=$(wc -l <"$1")
	for c in 1 2 3; do
		sort -g -k$c,$c "$1" | awk -v c=$c -v m=$(((n + 1) / 2)) 'NR == m { printf "%9s ", $c }'
	done
	tail -1 "$1" | awk '{ printf "%5s %s", $4, $5 }'
}

config='{"name": "bench", "lock": "single", "nemesis": "restart", "workload": "mutex",
 "system": "redis-masters", "nodes": 3, "clients": 10, "keys": 1, "ttl": "100ms", "seed": 1}'

printf "%-9s %-5s %-7s %9s %9s %9s %5s %s\n" ops check binary wall-s cpu-s peak-MiB exit verdict-sha
for n in $sizes; do
	"$tmp/genhistory" -ops "$n" -overlaps "${OVERLAPS:-0}" -o "$tmp/h.jsonl"
	mib=$(($(stat -c %s "$tmp/h.jsonl") >> 20))
	bins=(after)
	[ -n "$before" ] && bins=(before after)
	for b in "${bins[@]}"; do
		mkdir -p "$tmp/run-$b"
		ln -f "$tmp/h.jsonl" "$tmp/run-$b/history.jsonl"
		echo "$config" >"$tmp/run-$b/config.json"
		: >"$tmp/file-$b" && : >"$tmp/dir-$b"
	done
	for _ in $(seq "$reps"); do
		for b in "${bins[@]}"; do
			bin=$after
			[ "$b" = before ] && bin=$before
			measure "$bin" "$tmp/h.jsonl" "" >>"$tmp/file-$b"
			measure "$bin" "$tmp/run-$b" "$tmp/run-$b" >>"$tmp/dir-$b"
		done
	done
	for t in file dir; do
		for b in "${bins[@]}"; do
			printf "%-9s %-5s %-7s %s\n" "$n" "$t" "$b" "$(median "$tmp/$t-$b")"
		done
	done
	echo "          (history $mib MiB, median of $reps)"
	rm -rf "$tmp/h.jsonl" "$tmp"/run-*
done
