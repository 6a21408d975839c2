#!/usr/bin/env bash
# Re-checks every run of a store with a lockpick binary and compares what it finds with what the
# run's own binary found: the verdict and every count and list length in results.json (the check's
# duration and the run directory's name aside). A refactor that must not change behaviour (issue 25)
# re-checks the runs an older binary stored to the same results. The store is copied first: check
# rewrites a run's files.
#   scripts/recheck.sh STORE [LOCKPICK]      (LOCKPICK defaults to bin/lockpick)
set -euo pipefail
store=${1:?usage: scripts/recheck.sh STORE [LOCKPICK]}
bin=$(realpath "${2:-bin/lockpick}")
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r "$store"/. "$copy"
runs=0 differ=0
while IFS= read -r results; do
	dir=$(dirname "$results")
	rel=${dir#"$copy"/}
	"$bin" check "$dir" >/dev/null 2>&1 || true
	runs=$((runs + 1))
	if ! /usr/bin/python3 - "$store/$rel/results.json" "$results" "$rel" <<'PY'; then differ=$((differ + 1)); fi
import json, sys
def shape(path):
    r = json.load(open(path))
    out = {}
    def walk(prefix, v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k not in ("check_duration", "dir"):
                    walk(prefix + "." + k, x)
        elif isinstance(v, list):
            out[prefix] = len(v)
        elif isinstance(v, (bool, int, str)) and not isinstance(v, float):
            out[prefix] = v
    walk("", r)
    return out
old, new = shape(sys.argv[1]), shape(sys.argv[2])
diff = {k: (old.get(k), new.get(k)) for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
verdict = "valid" if new.get(".valid") else "invalid"
if diff:
    print(f"{sys.argv[3]}: {verdict}, differs: {diff}")
    sys.exit(1)
print(f"{sys.argv[3]}: {verdict}, same")
PY
done < <(find "$copy" -name results.json -not -path '*/latest/*' | sort)
echo "$runs runs re-checked: $((runs - differ)) the same, $differ differ"
[ "$differ" -eq 0 ]
