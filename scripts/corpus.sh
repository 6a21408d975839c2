#!/usr/bin/env bash
# The client corpus (clients/corpus/): each client through the shape that exposes it, one verdict
# line each. Fails when a broken client is judged valid or a correct one is not valid.
#
#   scripts/corpus.sh [LOCKPICK]          (default bin/lockpick; make corpus builds it first)
#   ONLY='shared_value correct_single' SEED=3 PARALLEL=2 STORE=dir scripts/corpus.sh
#
# Expectations: invalid (a broken client: any finding), deadlock (a broken client whose finding must
# be the liveness one), valid (a correct client), gap (a broken client that today's lockpick is
# known not to catch, with the reason in clients/corpus/README.md: it fails the corpus like a miss,
# unless ALLOW_GAPS=1; once caught it passes, and the row should become invalid).
#
# Shapes follow the self-test's cells (cmd/lockpick/selftest.go): TTL 1.5s, 3 keys, 10 clients,
# 1s recovery; PARALLEL runs at once (default 2: the corpus clients are Python, ten interpreters a run).
set -u
BIN=${1:-bin/lockpick}
SEED=${SEED:-1}
PARALLEL=${PARALLEL:-2}
STORE=${STORE:-$(mktemp -d /tmp/lockpick-corpus-XXXXXX)}
ONLY=${ONLY:-}
ALLOW_GAPS=${ALLOW_GAPS:-0}
COMMON="--lock client --ttl 1500ms --keys 3 --clients 10 --recovery 1s --seed $SEED --store $STORE"
C=clients/corpus

# name | client | expect | flags
SHAPES=$(cat <<'TABLE'
shared_value        | shared_value.py        | invalid  | --time-limit 8s
check_then_set      | check_then_set.py      | invalid  | --time-limit 8s --client-groups 2 --node-timeout 900ms --nemesis latency:group=c2:target=all:mode=steady:delay=700ms:duration=2s:interval=500ms
reentrant_local     | reentrant_local.py     | invalid  | --time-limit 8s --client-capabilities reentrant --reentrant --hold-max 5s --think-max 5ms
token_wallclock     | token_wallclock.py     | invalid  | --time-limit 8s --client-capabilities token --think-max 5ms --nemesis client-clock:target=all:offset=5s:duration=2s:interval=1s
validity_plus_drift | validity_plus_drift.py | invalid  | --time-limit 8s --client-capabilities validity --think-max 5ms
retry_exists        | retry_exists.py        | invalid  | --time-limit 8s --client-groups 2 --nemesis latency:group=c2:target=all:mode=spike:duration=1s:interval=1s
extend_get_pexpire  | extend_get_pexpire.py  | invalid  | --time-limit 8s --client-capabilities extend --extend --client-groups 2 --node-timeout 900ms --nemesis latency:group=c2:target=all:mode=steady:delay=700ms:duration=2s:interval=500ms
watchdog_blind      | watchdog_blind.py      | invalid  | --time-limit 8s --client-capabilities watchdog,validity --nemesis client-pause:duration=2s:interval=1s
extend_adds         | extend_adds.py         | invalid  | --time-limit 15s --client-capabilities validity,extend --extend
zombie_watchdog     | zombie_watchdog.py     | deadlock | --time-limit 8s --recovery 5s --keys 8 --node-timeout 1s --hold-max 300ms --client-capabilities watchdog,validity --nemesis partition:kind=isolate:mode=drop:duration=700ms:interval=5s
redlock_reachable_quorum | redlock_reachable_quorum.py | invalid | --time-limit 8s --nodes 5 --client-capabilities validity --client-groups 2 --nemesis partition:kind=client-majority:duration=3s:interval=1s
redlock_no_cleanup  | redlock_no_cleanup.py  | gap      | --time-limit 8s --recovery 5s --nodes 5 --client-capabilities validity --client-groups 2 --node-timeout 900ms --nemesis latency:group=c2:target=minority:mode=steady:delay=700ms:duration=2s:interval=500ms
correct_single-none        | correct_single.py | valid | --time-limit 8s --client-capabilities validity,extend
correct_single-extend      | correct_single.py | valid | --time-limit 8s --client-capabilities validity,extend --extend
correct_single-slow-group  | correct_single.py | valid | --time-limit 8s --client-capabilities validity,extend --client-groups 2 --node-timeout 900ms --nemesis latency:group=c2:target=all:mode=steady:delay=700ms:duration=2s:interval=500ms
correct_single-timeouts    | correct_single.py | valid | --time-limit 8s --client-capabilities validity,extend --client-groups 2 --nemesis latency:group=c2:target=all:mode=spike:duration=1s:interval=1s
correct_single-client-clock | correct_single.py | valid | --time-limit 8s --client-capabilities validity,extend --hold-max 3s --think-max 5ms --nemesis client-clock:target=all:offset=1500ms:duration=3s:interval=1s
correct_single-drift       | correct_single.py | valid | --time-limit 16s --client-capabilities validity,extend --think-max 5ms --nemesis clock:jump=fast:rate=0.008:target=all:duration=15s:interval=200ms
correct_single-extend-slow | correct_single.py | valid | --time-limit 8s --client-capabilities validity,extend --extend --client-groups 2 --node-timeout 900ms --nemesis latency:group=c2:target=all:mode=steady:delay=700ms:duration=2s:interval=500ms
correct_single-clock-5s    | correct_single.py | valid | --time-limit 8s --client-capabilities validity,extend --think-max 5ms --nemesis client-clock:target=all:offset=5s:duration=2s:interval=1s
correct_single-client-pause | correct_single.py | valid | --time-limit 8s --client-capabilities validity,extend --nemesis client-pause:duration=2s:interval=1s
correct_single-drop        | correct_single.py | valid | --time-limit 8s --recovery 5s --keys 8 --node-timeout 1s --hold-max 300ms --client-capabilities validity,extend --nemesis partition:kind=isolate:mode=drop:duration=700ms:interval=5s
correct_redlock-none       | correct_redlock.py | valid | --time-limit 8s --nodes 3 --client-capabilities validity,extend
correct_redlock-extend     | correct_redlock.py | valid | --time-limit 8s --nodes 3 --client-capabilities validity,extend --extend
correct_redlock-slow-group | correct_redlock.py | valid | --time-limit 8s --nodes 3 --client-capabilities validity,extend --client-groups 2 --node-timeout 900ms --nemesis latency:group=c2:target=minority:mode=steady:delay=700ms:duration=2s:interval=500ms
correct_redlock-slow-group5 | correct_redlock.py | valid | --time-limit 8s --recovery 5s --nodes 5 --client-capabilities validity,extend --client-groups 2 --node-timeout 900ms --nemesis latency:group=c2:target=minority:mode=steady:delay=700ms:duration=2s:interval=500ms
correct_redlock-drift      | correct_redlock.py | valid | --time-limit 16s --nodes 3 --client-capabilities validity,extend --think-max 5ms --nemesis clock:jump=fast:rate=0.008:target=all:duration=15s:interval=200ms
correct_redlock-partition  | correct_redlock.py | valid | --time-limit 8s --nodes 5 --client-capabilities validity,extend --client-groups 2 --nemesis partition:kind=client-majority:duration=3s:interval=1s
TABLE
)

[ -x "$BIN" ] || { echo "corpus: $BIN not found: make build first" >&2; exit 255; }
RESULTS=$(mktemp -d /tmp/lockpick-corpus-res-XXXXXX)

one() { # name client expect flags...
  local name=$1 client=$2 expect=$3; shift 3
  local out="$RESULTS/$name.out" t0=$SECONDS
  # shellcheck disable=SC2086
  "$BIN" run $COMMON --name "corpus-$name" --client-cmd "$C/$client" "$@" >"$out" 2>&1
  local rc=$? dir
  dir=$(sed -n 's/.*run stored in //p' "$out" | tail -1)
  local verdict=unknown first=- ok=FAIL
  case $rc in 0) verdict=valid ;; 1) verdict=invalid ;; 2) verdict=unknown ;; *) verdict="error($rc)" ;; esac
  if [ -n "$dir" ] && [ -f "$dir/results.json" ]; then
    first=$(/usr/bin/python3 - "$dir/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f = r.get("first_finding")
live = (r.get("liveness") or {}).get("verdict", "?")
if f:
    print("%s at %.2fs: %s" % (f["kind"], f["at"] / 1e9, f["description"][:160]))
else:
    print("liveness %s" % live)
PY
)
  fi
  case $expect in
    valid) [ "$verdict" = valid ] && ok=PASS ;;
    invalid) [ "$verdict" = invalid ] && ok=PASS ;;
    gap) if [ "$verdict" = invalid ]; then ok=PASS; elif [ "$ALLOW_GAPS" = 1 ]; then ok=GAP; fi ;;
    deadlock) [ "$verdict" = invalid ] && case $first in deadlock*) ok=PASS ;; esac ;;
  esac
  printf '%s %-27s seed %s expect %-8s got %-8s (%ss) %s\n' "$ok" "$name" "$SEED" "$expect" "$verdict" "$((SECONDS - t0))" "$first" | tee "$RESULTS/$name.line"
}

names=()
while IFS='|' read -r name client expect flags; do
  name=$(echo "$name" | xargs); client=$(echo "$client" | xargs); expect=$(echo "$expect" | xargs)
  [ -z "$name" ] && continue
  if [ -n "$ONLY" ] && ! printf ' %s ' $ONLY | grep -q " ${name%%-*} \| $name "; then continue; fi
  names+=("$name")
  # shellcheck disable=SC2086
  one "$name" "$client" "$expect" $flags &
  while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n; done
done <<<"$SHAPES"
wait

fails=0
for n in "${names[@]}"; do grep -q '^\(PASS\|GAP\)' "$RESULTS/$n.line" 2>/dev/null || fails=$((fails + 1)); done
echo "corpus: $(( ${#names[@]} - fails )) of ${#names[@]} as expected (seed $SEED; runs in $STORE; outputs in $RESULTS)"
[ "$fails" -eq 0 ]
