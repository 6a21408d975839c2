#!/usr/bin/env bash
# The newcomer's path, run by `make test` after the Go tests (and alone by `make newcomer`): in a
# fresh clone of the committed HEAD, with every default, what the README tells a newcomer to type:
#   make build; bin/lockpick run; bin/lockpick check store/latest; an etcd run; one scenario target;
#   a card; the demo; every command the docs mark runnable (scripts/docs-commands.py).
# The test suite uses absolute temporary paths everywhere; this is what runs what a user types, so
# that a broken first run never lands again. It fails loudly on a crash (exit 255 or a signal) and on
# any exit code other than the one the step must give.
#
# Only the time limits are shortened. KEEP=1 keeps the clone (its path is printed).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
# Nothing from the caller's make or environment may change a default.
unset MAKEFLAGS MFLAGS MAKELEVEL GNUMAKEFLAGS ARGS STORE SEED TIME_LIMIT
work=$(mktemp -d "${TMPDIR:-/tmp}/lockpick-newcomer.XXXXXX")
if [ "${KEEP:-}" = 1 ]; then
	trap 'echo "newcomer: clone kept in $work/lockpick"' EXIT
else
	trap 'rm -rf "$work"' EXIT
fi
clone=$work/lockpick

if rev=$(git -C "$src" rev-parse --verify -q HEAD 2>/dev/null); then
	git clone -q --no-checkout "$src" "$clone"
	git -C "$clone" checkout -q --detach "$rev"
	if [ -n "$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
		echo "newcomer: note: uncommitted changes in $src are not tested, only the commit ${rev:0:12}"
	fi
	echo "newcomer: fresh clone of ${rev:0:12} in $clone"
else
	echo "newcomer: $src is not a git checkout: testing a copy of its files instead"
	mkdir -p "$clone"
	tar -C "$src" --exclude=./bin --exclude=./store -cf - . | tar -C "$clone" -xf -
fi
cd "$clone"

failed=0
# step WANT NAME COMMAND...: runs COMMAND in the clone (stdin closed, as in CI), shows its output,
# and checks its exit code against WANT. Sets $code.
step() {
	local want=$1 name=$2
	shift 2
	local began=$SECONDS
	echo
	echo "newcomer: == $name: $*"
	set +e
	"$@" </dev/null 2>&1 | tee "$work/step.log"
	code=${PIPESTATUS[0]}
	set -e
	local took=$((SECONDS - began))
	if [ "$code" -eq "$want" ]; then
		echo "newcomer: == $name: exit $code as expected ($took s)"
		return 0
	fi
	failed=1
	echo >&2
	echo "newcomer: !!!!!!!! $name FAILED: exit $code, expected $want ($took s): $*" >&2
	if [ "$code" -ge 128 ] || [ "$code" -eq 255 ]; then
		echo "newcomer: !!!!!!!! that is a crash: the first run of a newcomer is broken" >&2
	fi
	return 1
}

step 0 build make build || true
[ -x bin/lockpick ] || { echo "newcomer: FAILED: make build left no bin/lockpick" >&2; exit 1; }

# The README's first run: every default (redlock, no faults, store "store"), only shorter.
step 0 run bin/lockpick run --time-limit 10s || true
run_code=$code
if [ ! -d store/latest ]; then
	echo "newcomer: !!!!!!!! store/latest is missing after the run" >&2
	failed=1
fi
# Re-checking the stored run gives the same verdict and exit code.
if [ "$run_code" -le 2 ]; then
	step "$run_code" check bin/lockpick check store/latest || true
else
	echo "newcomer: !!!!!!!! check not tried: the run crashed" >&2
fi

# The README's first etcd run: three members of Debian's etcd, etcd's own lock, no faults.
step 0 etcd bin/lockpick run --lock etcd --time-limit 10s || true

# One scenario target, as the README shows it.
step 0 scenario make single-none "ARGS=--time-limit 5s" || true

# The card of a client program, as the README shows it (one row, one seed, short): redis-py's
# client keeps its promise on holds to the deadline, so the card exits 0.
step 0 card bin/lockpick card --client-cmd "/usr/bin/python3 clients/python/redis_lock.py" --rows deadline --seeds 1 --time-limit 5s || true

# The demo, short: restart without persistence INVALID, delayed restart valid.
step 0 demo env TIME_LIMIT=15s make demo || true

# Every command the docs mark runnable, as typed (scripts/docs-commands.py; alone: make
# docs-commands, which clones and builds for itself): here in this clone, already built.
step 0 docs /usr/bin/python3 scripts/docs-commands.py --here || true

echo
if [ "$failed" -ne 0 ]; then
	echo "newcomer: FAILED: a newcomer's first commands do not work (see the !!!!!!!! lines above)" >&2
	exit 1
fi
echo "newcomer: ok: build, run, check, an etcd run, a scenario target, a card, the demo and the docs' runnable commands work in a fresh clone with every default"
