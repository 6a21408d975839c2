#!/bin/sh
# The Docker subset of the scenarios (make docker-scenarios) over seeds, each scenario run on the
# docker backend and then on the local backend, with its outcome and wall time side by side.
# Usage: [SCENARIOS="a b ..."] scripts/docker-figures.sh [bin/lockpick] [store] [seeds...]
set -u
BIN=${1:-bin/lockpick}
STORE=${2:-/tmp/lockpick-docker-figures}
shift 2 2>/dev/null
SEEDS=${*:-1 2 3}
# The Makefile's DOCKER_SCENARIOS, continuation lines included.
SCENARIOS=${SCENARIOS:-$(sed -n '/^DOCKER_SCENARIOS :=/,/[^\\]$/p' Makefile | sed 's/^DOCKER_SCENARIOS :=//; s/\\$//' | tr -s ' \t\n' '  ')}
printf '%-32s %4s  %-8s %7s  %-8s %7s\n' scenario seed docker time local time
for seed in $SEEDS; do
	for s in $SCENARIOS; do
		line=$(printf '%-32s %4s' "$s" "$seed")
		for backend in docker local; do
			t0=$(date +%s.%N)
			if "$BIN" run "scenarios/$s.yaml" --backend "$backend" --seed "$seed" --stop-at-first --store "$STORE/$backend" >"$STORE.$backend.$s.$seed.log" 2>&1; then
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
