#!/bin/sh
# Scenarios (the six redis-masters ones, or SCENARIOS) over the ssh backend beside the local backend, over seeds: each
# scenario's outcome and wall time on both. The hosts come from LOCKPICK_SSH_HOSTS, _KEY and
# _KNOWN_HOSTS (eval "$(scripts/ssh-hosts.sh env)" after scripts/ssh-hosts.sh up, for namespace hosts).
# TIME_LIMIT=own runs each scenario for its own time limit (the files' time_limit) rather than 20 s,
# for scenarios whose fault comes late (a failover's wait). BACKENDS="ssh" or "local" runs one side
# only, so the two sides can run at once, under the same load, each printing its own table.
# Usage: [SCENARIOS="a b ..."] [TIME_LIMIT=20s|own] [BACKENDS="ssh local"] scripts/ssh-figures.sh [bin/lockpick] [store] [seeds...]
set -u
BIN=${1:-bin/lockpick}
STORE=${2:-store/ssh-figures}
shift 2 2>/dev/null
SEEDS=${*:-1 2 3}
SCENARIOS=${SCENARIOS:-redlock-restart single-restart redlock-clock-forward-majority redlock-delayed-restart redlock-partition-client-minority redlock-node-pause}
TIME_LIMIT=${TIME_LIMIT:-20s}
BACKENDS=${BACKENDS:-ssh local}
: "${LOCKPICK_SSH_HOSTS:?set LOCKPICK_SSH_HOSTS (eval \"\$(scripts/ssh-hosts.sh env)\")}"
mkdir -p "$STORE"
header=$(printf '%-34s %4s' scenario seed)
for backend in $BACKENDS; do header="$header  $(printf '%-8s %7s' "$backend" time)"; done
echo "$header"
for seed in $SEEDS; do
	for s in $SCENARIOS; do
		line=$(printf '%-34s %4s' "$s" "$seed")
		for backend in $BACKENDS; do
			set --
			[ "$backend" = ssh ] && set -- --hosts "$LOCKPICK_SSH_HOSTS" --ssh-key "$LOCKPICK_SSH_KEY" --ssh-known-hosts "$LOCKPICK_SSH_KNOWN_HOSTS"
			[ "$TIME_LIMIT" != own ] && set -- "$@" --time-limit "$TIME_LIMIT"
			t0=$(date +%s.%N)
			if "$BIN" run "scenarios/$s.yaml" --backend "$backend" "$@" --seed "$seed" --stop-at-first \
				--store "$STORE/$backend" >"$STORE/$backend.$s.$seed.log" 2>&1; then
				met=met
			else
				met="NOT($?)"
			fi
			t1=$(date +%s.%N)
			line="$line  $(printf '%-8s %6.1fs' "$met" "$(echo "$t1 - $t0" | bc)")"
		done
		echo "$line"
	done
done
