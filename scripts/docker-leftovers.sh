#!/bin/sh
# Leftovers of docker runs ended by SIGINT, SIGTERM and SIGKILL mid-run: lockpick's containers,
# networks and node images (by their labels) while the run goes, after lockpick exits, and after
# `lockpick clean`. Usage: scripts/docker-leftovers.sh [bin/lockpick] [store]
set -u
BIN=${1:-bin/lockpick}
STORE=${2:-/tmp/lockpick-leftovers}
# This script's runs only (their label is a directory under the store), and the shared node images
# (another run going at the same time keeps its own, and its image, which clean leaves alone).
count() {
	c=$(docker ps -a --format '{{.Label "dev.lockpick.run"}}' | grep -c "^$STORE/")
	n=$(docker network ls --format '{{.Label "dev.lockpick.run"}}' | grep -c "^$STORE/")
	i=$(docker images -q --filter label=dev.lockpick.image | wc -l)
	echo "containers $c, networks $n, node images $i"
}
echo "before: $(count)"
for sig in INT TERM KILL; do
	"$BIN" run --backend docker --lock redlock --nodes 3 --nemesis pause,netcut --interval 1s --ttl 1s \
		--time-limit 60s --seed 3 --store "$STORE" >/dev/null 2>&1 &
	pid=$!
	sleep 12
	during=$(count)
	kill -s "$sig" "$pid"
	wait "$pid" 2>/dev/null
	after=$(count)
	cleaned=$("$BIN" clean)
	echo "SIG$sig: during the run: $during; after lockpick exited: $after; lockpick clean: $cleaned; then: $(count)"
done
