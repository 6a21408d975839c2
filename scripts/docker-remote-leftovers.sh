#!/bin/sh
# Leftovers of runs on a remote Engine ended by SIGINT, SIGTERM and SIGKILL mid-run: this machine's
# Engine exposed on a loopback TCP port (scripts/dockerfwd) is the remote Engine. Counts lockpick's
# containers (two a node), networks and the volumes those containers mount (the holders' clock
# volumes) while the run goes, after lockpick exits, and after `lockpick clean --docker-host`.
# Usage: [RUN="--lock sentinel --nemesis failover"] scripts/docker-remote-leftovers.sh [bin/lockpick] [store]
set -u
BIN=${1:-bin/lockpick}
STORE=${2:-/tmp/lockpick-remote-leftovers}
RUN=${RUN:-"--lock redlock --nodes 3 --nemesis pause,netcut"}
mkdir -p "$STORE"
go build -o "$STORE/dockerfwd" ./scripts/dockerfwd || exit 1
"$STORE/dockerfwd" >"$STORE/fwd.addr" &
FWD=$!
trap 'kill $FWD' EXIT
sleep 1
REMOTE=$(cat "$STORE/fwd.addr")
echo "remote Engine: $REMOTE (this machine's Engine over TCP)"
# This script's runs only: their label is a directory under the store.
ids() { docker ps -a --filter label=dev.lockpick.run --format '{{.ID}} {{.Label "dev.lockpick.run"}}' | grep " $STORE/" | cut -d' ' -f1; }
count() {
	c=$(ids | wc -l)
	n=$(docker network ls --format '{{.Label "dev.lockpick.run"}}' | grep -c "^$STORE/")
	echo "containers $c, networks $n"
}
for sig in INT TERM KILL; do
	# shellcheck disable=SC2086
	"$BIN" run --backend docker --docker-host "$REMOTE" $RUN --interval 1s --ttl 1s \
		--time-limit 60s --seed 3 --store "$STORE" >"$STORE/run.$sig.log" 2>&1 &
	pid=$!
	sleep 12
	during=$(count)
	vols=$(for id in $(ids); do docker inspect -f '{{range .Mounts}}{{.Name}} {{end}}' "$id"; done | tr ' ' '\n' | sort -u | grep .)
	kill -s "$sig" "$pid"
	wait "$pid" 2>/dev/null
	after=$(count)
	cleaned=$("$BIN" clean --docker-host "$REMOTE" --keep-images)
	left=0
	for v in $vols; do docker volume inspect "$v" >/dev/null 2>&1 && left=$((left + 1)); done
	echo "SIG$sig: during the run: $(echo "$during"), $(echo "$vols" | grep -c .) clock volumes; after lockpick exited: $after; lockpick clean: $cleaned; then: $(count), $left of those volumes"
done
