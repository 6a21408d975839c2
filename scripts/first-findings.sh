#!/usr/bin/env bash
# Time to the first finding of every scenario that expects one, over several seeds: each seed is one
# `lockpick scenario --stop-at-first` of those scenarios, side by side; the table gives, per
# scenario, the time of its first finding per seed and the median. Usage:
#   scripts/first-findings.sh BIN STORE PARALLEL SEED...
set -euo pipefail
bin=$1 store=$2 parallel=$3
shift 3
names=$("$bin" scenario --list | awk '$4 == "expect" && $5 ~ /^invalid/ {print $1}')
start=$(date +%s)
for seed in "$@"; do
	"$bin" scenario $names --seed "$seed" --stop-at-first --parallel "$parallel" --store "$store/seed$seed" | grep -E '^[0-9]+ scenarios in' || true
done
echo "all seeds: $(($(date +%s) - start)) s"
/usr/bin/python3 - "$store" "$@" <<'PY'
import json, os, statistics, sys
store, seeds = sys.argv[1], sys.argv[2:]
rows = {}
for seed in seeds:
    root = os.path.join(store, "seed" + seed)
    for name in sorted(os.listdir(root)):
        for run in sorted(os.listdir(os.path.join(root, name))):
            try:
                r = json.load(open(os.path.join(root, name, run, "results.json")))
            except (OSError, ValueError):
                continue
            f = r.get("first_finding") or {}
            rows.setdefault(name, {})[seed] = f.get("at", 0) / 1e9 if f else None
print("| scenario | " + " | ".join("seed " + s for s in seeds) + " | median |")
print("|---|" + "---|" * (len(seeds) + 1))
meds = []
for name, by in sorted(rows.items()):
    ts = [by.get(s) for s in seeds]
    got = [t for t in ts if t is not None]
    med = statistics.median(got) if got else None
    if med is not None:
        meds.append(med)
    cell = lambda t: "none" if t is None else f"{t:.1f} s"
    print(f"| {name} | " + " | ".join(cell(t) for t in ts) + f" | {cell(med)} |")
if meds:
    print(f"\n{len(rows)} scenarios; median of the medians {statistics.median(meds):.1f} s, largest {max(meds):.1f} s")
PY
