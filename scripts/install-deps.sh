#!/usr/bin/env bash
# Installs what lockpick needs and does not find: redis-server, and a C compiler for the clock shim.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v go >/dev/null 2>&1 || { echo "lockpick needs Go 1.26 or newer on PATH (https://go.dev/doc/install)" >&2; exit 1; }
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "lockpick needs: ${need[*]}. Install them with: sudo apt-get install -y ${need[*]}" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "lockpick needs: ${need[*]}, and this machine has no apt-get: install them with your package manager" >&2
	exit 1
fi
echo "installing ${need[*]} with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian starts a system redis on 6379; lockpick runs its own nodes and needs none.
if command -v service >/dev/null 2>&1; then service redis-server stop >/dev/null 2>&1 || true; fi
