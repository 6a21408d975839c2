#!/usr/bin/env bash
# Installs what lockpick and its CI need and does not find: redis-server, etcd, a C compiler and the libc
# headers (the clock shim), make; and, when it may install, git, CA certificates and the packages of
# the shipped lock clients (python3-redis, python3-tooz, php-cli, php-redis, php-malkusch-lock). Go itself must
# be on PATH. As root on Debian it installs with apt-get, without questions (CI runs it with no
# stdin); otherwise it prints the line that installs what is required.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v make >/dev/null 2>&1 || need+=(make)
# The etcd system's members (Debian's etcd 3.4); a current etcd builds from the Go module proxy.
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v go >/dev/null 2>&1 || { echo "lockpick needs Go 1.26 or newer on PATH (https://go.dev/doc/install; /usr/local/go/bin?)" >&2; exit 1; }
# Wanted but not required: git (the revision in each run's config, and make newcomer's clone, which
# falls back to a copy) and CA certificates (the Go module proxy, unless the modules are cached).
# Installed when this script may install, never a reason to stop.
want=()
command -v git >/dev/null 2>&1 || want+=(git)
# The shipped lock clients (--lock py-redis, py-tooz, php-malkusch; docs/protocol.md): Debian's
# python3 with redis-py and tooz, and PHP with phpredis and malkusch/lock.
/usr/bin/python3 -c 'import redis' >/dev/null 2>&1 || want+=(python3-redis)
/usr/bin/python3 -c 'import tooz' >/dev/null 2>&1 || want+=(python3-tooz)
command -v php >/dev/null 2>&1 || want+=(php-cli)
[ -e /usr/share/php/Malkusch/Lock/autoload.php ] || want+=(php-malkusch-lock)
{ command -v php >/dev/null 2>&1 && php -m 2>/dev/null | grep -qx redis; } || want+=(php-redis)
# The ZooKeeper locks' clients (--lock curator, kazoo): Curator's recipes with their ZooKeeper
# client jars, a JDK whose javac compiles the Curator client, and kazoo for Debian's python3.
[ -e /usr/share/java/curator-recipes.jar ] || want+=(libcurator-recipes-java)
command -v javac >/dev/null 2>&1 || want+=(default-jdk-headless)
/usr/bin/python3 -c 'import kazoo' >/dev/null 2>&1 || want+=(python3-kazoo)
# The zookeeper system's members (Debian's ZooKeeper 3.8, run as JVMs by lockpick).
[ -e /usr/share/java/zookeeper.jar ] || want+=(zookeeper)
[ -e /etc/ssl/certs/ca-certificates.crt ] || want+=(ca-certificates)
# The SSH backend's test hosts (scripts/ssh-hosts.sh): network namespaces, one sshd each.
[ -x /usr/sbin/sshd ] || want+=(openssh-server)
command -v ssh >/dev/null 2>&1 || want+=(openssh-client)
command -v ip >/dev/null 2>&1 || want+=(iproute2)
# The ssh etcd test times a connect from a test host to a member's peer port with curl.
command -v curl >/dev/null 2>&1 || want+=(curl)
command -v iptables >/dev/null 2>&1 || want+=(iptables)
# The postgres system's server (Debian's PostgreSQL 15) and the pooler in front of it.
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || want+=(postgresql)
command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || want+=(pgbouncer)
# The disk-stall nemesis holds a server's fsyncs with strace's fault injection.
command -v strace >/dev/null 2>&1 || want+=(strace)
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	want=()
fi
need+=("${want[@]}")
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
apt-get update -qq </dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null >/dev/null
# Debian starts a system redis on 6379, an etcd on 2379, a PostgreSQL on 5432 and a PgBouncer on 6432; lockpick runs its own nodes and needs none.
if command -v service >/dev/null 2>&1; then
	service redis-server stop >/dev/null 2>&1 || true
	service etcd stop >/dev/null 2>&1 || true
	service postgresql stop >/dev/null 2>&1 || true
	service pgbouncer stop >/dev/null 2>&1 || true
	service zookeeper stop >/dev/null 2>&1 || true # Debian's starts on 2181
	service ssh stop >/dev/null 2>&1 || true
fi
