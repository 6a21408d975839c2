#!/usr/bin/env bash
# The client protocol's overhead: the built-in single lock (SET NX PX from Go) against py-redis
# (the same SET NX PX from redis-py's Lock in a Python program, through the client protocol), side
# by side on one node with the same seed, clients, keys and TTL. Each process has a key of its own
# and holds it for at most 1 ms, so the figures measure the path to the node and back, not
# contention. Prints acquire latency (p50, p99 of ok acquires) and grants per second, and the
# ratios py-redis / single. Usage: scripts/bench-protocol.sh [bin/lockpick] (ROUNDS=3 alternates runs).
set -euo pipefail
bin=${1:-bin/lockpick}
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
rounds=${ROUNDS:-3}
args=(--clients 10 --keys 10 --hold-max 1ms --think-max 1ms --ttl 2s --time-limit 10s --recovery 1s --seed 1 --store "$store")
for i in $(seq "$rounds"); do
	for lock in single py-redis; do
		"$bin" run --lock "$lock" --name "$lock-$i" "${args[@]}" >/dev/null || [ $? -le 2 ] || exit 1
	done
done
/usr/bin/python3 - "$store" "$rounds" <<'PY'
import glob, json, statistics, sys
store, rounds = sys.argv[1], int(sys.argv[2])
def figures(lock):
    rows = []
    for i in range(1, rounds + 1):
        r = json.load(open(glob.glob("%s/%s-%d/*/results.json" % (store, lock, i))[0]))["stats"]
        rows.append((r["acquire_latency_ok"]["p50_ms"], r["acquire_latency_ok"]["p99_ms"], r["grants_per_second"]))
    return [statistics.median(c) for c in zip(*rows)]
s, p = figures("single"), figures("py-redis")
print("medians of %d alternating runs, 10 clients, 10 keys, hold <= 1ms" % rounds)
print("%-9s %12s %12s %10s" % ("lock", "p50 acquire", "p99 acquire", "grants/s"))
for name, f in (("single", s), ("py-redis", p)):
    print("%-9s %10.2fms %10.2fms %10.1f" % (name, f[0], f[1], f[2]))
print("ratio py-redis/single: p50 latency x%.2f, p99 latency x%.2f, grants/s x%.2f" % (p[0] / s[0], p[1] / s[1], p[2] / s[2]))
PY
