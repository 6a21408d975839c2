#!/usr/bin/env bash
# Makes docs/cards/LOCK.md, the card of every shipped lock (make cards): one `lockpick card LOCK`
# after the other, each with --parallel 2, then one line per lock with its exit code and wall time.
# SEEDS (default 1) and LOCKS (default: every shipped lock) narrow it; STORE keeps the runs;
# ALL_SEEDS=1 runs a broken row's later seeds too (card --all-seeds: "broken in k of 5").
# Usage: scripts/cards.sh LOCKPICK
set -u
bin=${1:?usage: cards.sh LOCKPICK}
seeds=${SEEDS:-1}
store=${STORE:-store}
locks=${LOCKS:-single fenced redlock sentinel sentinel-wait sentinel-fenced watchdog r2m watchdog-sentinel r2m-sentinel setnx-getset setnx-del etcd etcd-unlock-retry py-redis py-tooz php-malkusch redsync redsync-1 bsm-redislock rueidislock go-zero go-zero-default go-zk curator kazoo pg-advisory pg-advisory-xact pg-lease pg-advisory-pgbouncer pg-advisory-pgbouncer-session}
mkdir -p docs/cards "$store"
for l in $locks; do
	start=$(date +%s)
	"$bin" card "$l" --seeds "$seeds" ${ALL_SEEDS:+--all-seeds} --parallel 2 --store "$store" --report "docs/cards/$l.md" >"$store/cards-$l.log" 2>&1
	rc=$?
	printf '%-20s exit %d  %4ds  %s\n' "$l" "$rc" $(($(date +%s) - start)) "$(sed -n 3p "docs/cards/$l.md" 2>/dev/null)"
done
