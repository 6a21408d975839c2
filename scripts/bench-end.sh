#!/usr/bin/env bash
# End-of-run benchmark (issue 28): what a user waits for after a run's planned time. Runs lockpick at
# the ceiling (single lock, no nemesis, 10 clients on one key, no think time, no holds) for
# END_TIME (default 60s) plus the default 5 s recovery, under /usr/bin/time -v, and reports:
#   end-s     from the end of the recovery phase (the history's last write: the recorder closes it
#             then, and nothing writes it after) to the process's exit: the check, the report, the
#             clean-up;
#   cpu-s     user+sys of the whole run, the nodes included;
#   peak-MiB  the largest resident set of the run (lockpick's own; the nodes' are smaller);
#   events    the history's events, and its verdict (the run's exit status: 0 valid).
# Usage: scripts/bench-end.sh LOCKPICK [BEFORE]   -- BEFORE, another lockpick binary, runs in turn
# with LOCKPICK, REPS times each (default 1), alternating, so both meet the same machine.
set -euo pipefail
after=${1:?usage: bench-end.sh LOCKPICK [BEFORE]}
before=${2:-}
limit=${END_TIME:-60s}
reps=${REPS:-1}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockpick-bench-end.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# measure BINARY -> "end-s cpu-s peak-MiB events verdict"
measure() {
	local rc exited hist
	rm -rf "$tmp/store"
	set +e
	/usr/bin/time -v "$1" run --lock single --nemesis none --clients 10 --think-max 1us --hold-max 1us \
		--time-limit "$limit" --seed 1 --store "$tmp/store" >"$tmp/out" 2>"$tmp/time"
	rc=$?
	exited=$(date +%s.%N)
	set -e
	hist=$(ls "$tmp"/store/single-none/*/history.jsonl)
	awk -v rc="$rc" -v exited="$exited" -v written="$(stat -c %.9Y "$hist")" -v events="$(wc -l <"$hist")" '
		/User time/ { u = $NF }
		/System time/ { y = $NF }
		/Maximum resident/ { m = $NF / 1024 }
		END {
			v = (rc == 0) ? "valid" : (rc == 1) ? "invalid" : (rc == 2) ? "unknown" : "exit-" rc
			printf "%.2f %.1f %.0f %d %s\n", exited - written, u + y, m, events, v
		}' "$tmp/time"
}

printf "%-8s %-7s %8s %8s %9s %10s %s\n" run binary end-s cpu-s peak-MiB events verdict
bins=(after)
[ -n "$before" ] && bins=(before after)
for i in $(seq "$reps"); do
	for b in "${bins[@]}"; do
		bin=$after
		[ "$b" = before ] && bin=$before
		printf "%-8s %-7s %8s %8s %9s %10s %s\n" "$limit" "$b" $(measure "$bin")
	done
done
