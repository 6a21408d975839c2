#!/usr/bin/env bash
# The catalogue of real lock bugs (docs/bugs.md): runs every row's scenario for each seed, side by
# side, and prints per scenario how many seeds met its expectation (a bug row expects the finding,
# a fixed-version control expects a valid run), the first finding's time per seed and the median.
# Usage:
#   scripts/bugs.sh BIN STORE PARALLEL SEED...
set -euo pipefail
bin=$1 store=$2 parallel=$3
shift 3
# The rows: each a scenario of the catalogue (docs/bugs.md says which upstream bug it reproduces).
# BUG_SCENARIOS, when set, runs only the rows it names.
names=${BUG_SCENARIOS:-"bug-redis-py-4279-reacquire bug-bsm-redislock-token etcd-unlock-retry
	bug-etcd-15247-old-leader-revoke bug-etcd-15247-fixed pg-advisory-terminate
	pg-advisory-xact-terminate pg-advisory-restart pg-advisory-pgbouncer pg-advisory-pgbouncer-session
	pg-advisory-halfopen pg-lease-halfopen pg-advisory-failover pg-advisory-pgbouncer-failover pg-lease-failover
	pg-lease-failover-sync
	bug-go-zero-4319-nested go-zero-none bug-curator-206-client-pause curator-678-release-cut
	bug-redsync-setnx-extend redsync-extend-pause bug-go-zero-keepalive-after-expiry"}
start=$(date +%s)
worst=0
for seed in "$@"; do
	mkdir -p "$store/seed$seed"
	# Exit 1 means some expectation was not met: the table says which. 255 means a scenario could
	# not run (a server that did not start, bad input): the table counts it as not met for that
	# seed, the other seeds still run, and the script exits 255 at the end.
	rc=0
	"$bin" scenario $names --seed "$seed" --stop-at-first --parallel "$parallel" --store "$store/seed$seed" \
		>"$store/seed$seed/out.txt" 2>&1 || rc=$?
	if [ "$rc" -gt 1 ]; then
		echo "seed $seed: lockpick scenario exited $rc: $(grep '^lockpick:' "$store/seed$seed/out.txt" | head -3) (see $store/seed$seed/out.txt)" >&2
	fi
	worst=$((rc > worst ? rc : worst))
	grep -E '^[0-9]+ scenarios in' "$store/seed$seed/out.txt" | sed "s/^/seed $seed: /" || true
done
echo "all seeds: $(($(date +%s) - start)) s"
/usr/bin/python3 - "$store" "$@" <<'PY'
import json, os, re, statistics, sys
store, seeds = sys.argv[1], sys.argv[2:]
met, first = {}, {}
for seed in seeds:
    root = os.path.join(store, "seed" + seed)
    for line in open(os.path.join(root, "out.txt")):
        m = re.match(r"== (\S+): expected .*: (met|NOT MET)", line)
        if m:
            met.setdefault(m.group(1), {})[seed] = m.group(2) == "met"
    for name in met:
        for run in sorted(os.listdir(os.path.join(root, name))) if os.path.isdir(os.path.join(root, name)) else []:
            try:
                r = json.load(open(os.path.join(root, name, run, "results.json")))
            except (OSError, ValueError):
                continue
            f = r.get("first_finding")
            first.setdefault(name, {})[seed] = f["at"] / 1e9 if f else None
print("| scenario | expectation met | " + " | ".join("seed " + s for s in seeds) + " | median first finding |")
print("|---|---|" + "---|" * (len(seeds) + 1))
cell = lambda t: "—" if t is None else (f"{t * 1000:.0f} ms" if t < 1 else f"{t:.1f} s")
for name in sorted(met):
    ts = [first.get(name, {}).get(s) for s in seeds]
    got = [t for t in ts if t is not None]
    k = sum(met[name].get(s, False) for s in seeds)
    med = statistics.median(got) if got else None
    print(f"| {name} | {k} of {len(seeds)} | " + " | ".join(cell(t) for t in ts) + f" | {cell(med)} |")
PY
exit "$worst"
