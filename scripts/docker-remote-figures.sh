#!/bin/sh
# The Docker subset of the scenarios on a remote Engine beside the local one: this machine's Engine
# exposed on a loopback TCP port (scripts/dockerfwd) is a remote Engine to lockpick (pods, published
# ports, API kill and pause, clock written from the holder, iptables in the holder). Each scenario
# runs with --docker-host tcp://127.0.0.1:PORT and then on the local socket, outcome and wall time
# side by side. Usage: [SCENARIOS="a b"] scripts/docker-remote-figures.sh [bin/lockpick] [store] [seeds...]
set -u
BIN=${1:-bin/lockpick}
STORE=${2:-/tmp/lockpick-docker-remote-figures}
shift 2 2>/dev/null
SEEDS=${*:-1 2 3}
SCENARIOS=${SCENARIOS:-"single-none single-restart single-restart-delayed single-clock-forward redlock-restart redlock-node-pause redlock-clock-forward-majority sentinel-failover etcd-partition-leader etcd-leader-kill"}
mkdir -p "$STORE"
go build -o "$STORE/dockerfwd" ./scripts/dockerfwd || exit 1
"$STORE/dockerfwd" >"$STORE/fwd.addr" &
FWD=$!
trap 'kill $FWD' EXIT
sleep 1
REMOTE=$(cat "$STORE/fwd.addr")
echo "remote Engine: $REMOTE (this machine's Engine over TCP)"
printf '%-32s %4s  %-8s %7s  %-8s %7s\n' scenario seed remote time local time
for seed in $SEEDS; do
	for s in $SCENARIOS; do
		line=$(printf '%-32s %4s' "$s" "$seed")
		for where in remote local; do
			host=""
			[ "$where" = remote ] && host="--docker-host $REMOTE"
			t0=$(date +%s.%N)
			# shellcheck disable=SC2086
			if "$BIN" run "scenarios/$s.yaml" --backend docker $host --seed "$seed" --stop-at-first --store "$STORE/$where" >"$STORE/$where.$s.$seed.log" 2>&1; then
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
