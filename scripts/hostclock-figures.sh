#!/usr/bin/env bash
# The host clock beside the shim (docs/ssh.md, Figures): the single lock over --backend ssh on one
# namespace host of set 2 (scripts/ssh-hosts.sh), a jump forward of 1.5s every ~2s for 10s, with
# clock:source=shim and clock:source=host alternately, seeds 1 and 2; per run the verdict, the
# fault windows, the wall time and how far CLOCK_REALTIME - CLOCK_MONOTONIC moved over the run.
# It MOVES THIS MACHINE'S CLOCK (the namespace host shares its kernel): root, and a machine where
# that is allowed. Usage: scripts/hostclock-figures.sh [BIN] [STORE]
set -euo pipefail
BIN=${1:-bin/lockpick}
STORE=${2:-store/hostclock-figures}
export LOCKPICK_SSH_SET=2
trap 'scripts/ssh-hosts.sh down >/dev/null' EXIT
scripts/ssh-hosts.sh up 1 >/dev/null
eval "$(scripts/ssh-hosts.sh env)"
offset() { /usr/bin/python3 -c 'import time; print(time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC))'; }
echo "$(date -u +%FT%TZ) $(uptime)"
for seed in 1 2; do
	for src in shim host; do
		allow=()
		[ "$src" = host ] && allow=(--allow-host-clock=shared)
		out=$(mktemp)
		before=$(offset) start=$(date +%s%N)
		"$BIN" run --backend ssh --hosts "$LOCKPICK_SSH_HOSTS" --ssh-key "$LOCKPICK_SSH_KEY" --ssh-known-hosts "$LOCKPICK_SSH_KNOWN_HOSTS" \
			--lock single --nemesis "clock:source=$src:jump=forward:offset=1500ms" "${allow[@]}" --interval 2s --time-limit 10s \
			--recovery 5s --seed "$seed" --store "$STORE" >"$out" 2>&1 || true
		end=$(date +%s%N) after=$(offset)
		printf '| %s | %s | %s | %s | %.1f | %+.3f |\n' "$src" "$seed" "$(grep -m1 '^verdict' "$out" | cut -d: -f2- | sed 's/^ //')" \
			"$(grep -m1 '^fault windows' "$out" | sed 's/fault windows: \([0-9]*\).*/\1/')" \
			"$(echo "($end - $start) / 1000000000" | bc -l)" "$(echo "($after - $before) / 1000000" | bc -l)"
		rm -f "$out"
	done
done
echo "$(date -u +%FT%TZ) $(uptime)"
