#!/usr/bin/env bash
# Runs Redlock twice side by side: nodes restarted at once without persistence (the spec says this
# breaks mutual exclusion) and the delayed restart the spec recommends (safe). Prints both verdicts.
set -uo pipefail
bin=${1:-bin/lockpick}
store=${2:-store}
seed=${SEED:-1}
limit=${TIME_LIMIT:-30s}
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$out"' EXIT
echo "Redlock, 5 nodes, 10 clients, TTL 2s, ${limit} of faults, seed ${seed}: two runs side by side..."
"$bin" run --lock redlock --nemesis restart --time-limit "$limit" --seed "$seed" --store "$store" --name demo-redlock-restart >"$out/restart.txt" 2>&1 &
a=$!
"$bin" run --lock redlock --nemesis restart-delayed --time-limit "$limit" --seed "$seed" --store "$store" --name demo-redlock-delayed-restart >"$out/delayed.txt" 2>&1 &
b=$!
wait $a; ca=$?
wait $b; cb=$?
verdict() { case $1 in 0) echo valid;; 1) echo INVALID;; 2) echo unknown;; *) echo "crashed (exit $1)";; esac; }
echo
echo "=== Redlock, restart without persistence: $(verdict $ca)"
cat "$out/restart.txt"
echo
echo "=== Redlock, delayed restart (down >= 1.5 x TTL): $(verdict $cb)"
cat "$out/delayed.txt"
echo
echo "restart: $(verdict $ca)    delayed restart: $(verdict $cb)"
[ $ca -le 2 ] && [ $cb -le 2 ]
