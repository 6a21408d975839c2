#!/usr/bin/env bash
# Test hosts for the SSH backend on one machine, as a CI can make them: N network namespaces
# (lp-h1..lp-hN) with a veth pair each on one bridge (lp-br0, 10.77.0.1/24), one sshd per namespace
# listening on that namespace's own address only (10.77.0.11, .12, ...), with its own host key and
# key-only root login. Nothing listens on the machine's own interfaces.
#
#   scripts/ssh-hosts.sh up [N]    make N hosts (default 3); removes what an earlier run left first
#   scripts/ssh-hosts.sh check     prove the healthy path: ssh to each host, and TCP between hosts
#   scripts/ssh-hosts.sh down      remove the namespaces, bridge, firewall rules, sshd processes
#   scripts/ssh-hosts.sh env       print the variables a test reads (LOCKPICK_SSH_HOSTS, ...)
#   scripts/ssh-hosts.sh selftest  up 2, check, prove a cut with iptables in a host, down, and
#                                  fail if anything is left (make test-long runs it)
#
# LOCKPICK_SSH_SET=K (1 to 9) makes a second set beside the first, for a figure run while tests use
# the first: namespaces lp-Kh1.., bridge lp-brK, addresses 10.77.K.x, its own rules and state.
#
# State (keys, known_hosts, sshd configs and logs) is under $LOCKPICK_SSH_DIR, default
# /tmp/lockpick-ssh-hosts (-K for a set K). `up` begins with `down`, so a test killed with SIGKILL leaves nothing the
# next `up` (or a `down`) does not remove.
#
# Two traps this handles: Docker's FORWARD DROP policy silently drops bridged traffic between the
# namespaces until an accept rule is added (check proves the path before a partition is trusted),
# and each namespace's loopback must be brought up for servers that bind 127.0.0.1 there.
set -euo pipefail

SET=${LOCKPICK_SSH_SET:-0}
[[ $SET =~ ^[0-9]$ ]] || { echo "ssh-hosts: LOCKPICK_SSH_SET is a digit from 0 to 9, got '$SET'" >&2; exit 255; }
if [ "$SET" = 0 ]; then
	NS=lp-h VETH=lp-v TAG=lockpick-ssh-hosts
else
	NS=lp-${SET}h VETH=lp-${SET}v TAG=lockpick-ssh-hosts-$SET
fi
DIR=${LOCKPICK_SSH_DIR:-/tmp/$TAG}
BRIDGE=lp-br$SET
NET=10.77.$SET

die() { echo "ssh-hosts: $*" >&2; exit 255; }

need() {
	[ "$(id -u)" = 0 ] || die "run as root: namespaces, a bridge and firewall rules need it"
	for t in ip iptables ssh ssh-keygen ssh-keyscan; do
		command -v "$t" >/dev/null || die "$t is missing: apt-get install iproute2 iptables openssh-client"
	done
	[ -x /usr/sbin/sshd ] || die "sshd is missing: apt-get install openssh-server"
}

hosts() { ip netns list 2>/dev/null | awk -v p="^$NS[0-9]+\$" '$1 ~ p {print $1}' | sort -V; }

addr() { echo "$NET.$((10 + ${1#"$NS"}))"; }

down() {
	for ns in $(hosts); do
		# Everything running in the namespace goes: sshd, and servers a killed run left there.
		for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
		ip netns delete "$ns" 2>/dev/null || true
		ip link delete "$VETH${ns#"$NS"}" 2>/dev/null || true
	done
	ip link delete "$BRIDGE" 2>/dev/null || true
	while iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -m comment --comment "$TAG" -j ACCEPT 2>/dev/null; do :; done
	rm -rf "$DIR"
}

# The hosts share this machine's /root. HOME is a directory of each host's own: root's .bashrc here
# may run `pyenv init`, whose rehash takes a lock that a session killed mid-way (as the tests that
# kill a run do) leaves behind, and every later ssh command then waits 60 s for it.
sshd_config() {
	local ns=$1 a=$2
	cat <<EOF
ListenAddress $a:22
HostKey $DIR/$ns/host_ed25519
PidFile $DIR/$ns/sshd.pid
AuthorizedKeysFile $DIR/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
SetEnv HOME=$DIR/$ns/home
EOF
}

up() {
	local n=${1:-3}
	[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 9 ] || die "up takes a number of hosts from 1 to 9, got '$n'"
	down
	mkdir -p "$DIR" /run/sshd
	ssh-keygen -q -t ed25519 -N '' -C "$TAG" -f "$DIR/id_ed25519"
	cp "$DIR/id_ed25519.pub" "$DIR/authorized_keys"
	ip link add "$BRIDGE" type bridge
	ip addr add "$NET.1/24" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	iptables -I FORWARD -i "$BRIDGE" -o "$BRIDGE" -m comment --comment "$TAG" -j ACCEPT
	: >"$DIR/known_hosts"
	for i in $(seq 1 "$n"); do
		local ns=$NS$i a
		a=$(addr "$ns")
		ip netns add "$ns"
		ip link add "$VETH$i" type veth peer name eth0 netns "$ns"
		ip link set "$VETH$i" master "$BRIDGE" up
		ip -n "$ns" addr add "$a/24" dev eth0
		ip -n "$ns" link set eth0 up
		ip -n "$ns" link set lo up
		# The hosts share this machine's /tmp too: what a run there left under a host's address
		# (systems.SSHBaseDir) belongs to an earlier incarnation of it, which a test cut short.
		rm -rf "/tmp/lockpick-ssh/$a"
		mkdir -p "$DIR/$ns/home"
		ssh-keygen -q -t ed25519 -N '' -C "$ns" -f "$DIR/$ns/host_ed25519"
		sshd_config "$ns" "$a" >"$DIR/$ns/sshd_config"
		ip netns exec "$ns" /usr/sbin/sshd -f "$DIR/$ns/sshd_config" -E "$DIR/$ns/sshd.log"
		echo "$a $(cut -d' ' -f1,2 "$DIR/$ns/host_ed25519.pub")" >>"$DIR/known_hosts"
	done
	check
}

ssh_to() {
	ssh -n -i "$DIR/id_ed25519" -o UserKnownHostsFile="$DIR/known_hosts" -o StrictHostKeyChecking=yes \
		-o BatchMode=yes -o ConnectTimeout=5 "root@$1" "${@:2}"
}

check() {
	local all=() ns
	mapfile -t all < <(hosts)
	[ ${#all[@]} -gt 0 ] || die "no hosts: run scripts/ssh-hosts.sh up first"
	for ns in "${all[@]}"; do
		local a tries=0
		a=$(addr "$ns")
		until got=$(ssh_to "$a" 'ip -o -4 addr show eth0' 2>/dev/null); do
			tries=$((tries + 1))
			[ $tries -lt 50 ] || die "ssh root@$a does not answer: see $DIR/$ns/sshd.log"
			sleep 0.1
		done
		[[ $got == *"$a/24"* ]] || die "ssh root@$a reached another host: $got"
	done
	# Host to host through the bridge: the path a partition will cut must first be shown to work.
	if [ ${#all[@]} -gt 1 ]; then
		local from=${all[0]} to
		for to in "${all[@]:1}"; do
			ip netns exec "$from" timeout 3 bash -c "exec 3<>/dev/tcp/$(addr "$to")/22" ||
				die "$from cannot reach $(addr "$to"):22 across $BRIDGE: a FORWARD rule drops bridged traffic (iptables -S FORWARD)"
		done
	fi
	echo "ssh-hosts: ${#all[@]} hosts answer ssh, and reach each other: ${all[*]}"
}

env_vars() {
	local list=() ns
	for ns in $(hosts); do list+=("$(addr "$ns")"); done
	echo "LOCKPICK_SSH_HOSTS=$(IFS=,; echo "${list[*]}")"
	echo "LOCKPICK_SSH_KEY=$DIR/id_ed25519"
	echo "LOCKPICK_SSH_KNOWN_HOSTS=$DIR/known_hosts"
}

# leftovers counts what down must have removed: namespaces, the bridge, rules, sshd processes.
leftovers() {
	local n=0
	n=$((n + $(hosts | wc -l)))
	ip link show "$BRIDGE" >/dev/null 2>&1 && n=$((n + 1))
	n=$((n + $(iptables -S FORWARD 2>/dev/null | grep -cE -- "--comment \"?$TAG\"?( |\$)" || true)))
	n=$((n + $(pgrep -f "sshd -f $DIR/" | wc -l)))
	[ -e "$DIR" ] && n=$((n + 1))
	echo "$n"
}

selftest() {
	up 2
	ip netns exec "${NS}1" iptables -A INPUT -s "$(addr "${NS}2")" -j DROP
	if ip netns exec "${NS}2" timeout 2 bash -c "exec 3<>/dev/tcp/$(addr "${NS}1")/22" 2>/dev/null; then
		die "selftest: ${NS}2 still reaches ${NS}1 through a DROP rule in ${NS}1"
	fi
	down
	local left
	left=$(leftovers)
	[ "$left" = 0 ] || die "selftest: down left $left things behind"
	echo "ssh-hosts: selftest passed (hosts up, ssh and the bridge work, a cut holds, nothing left)"
}

case ${1:-} in
up) need; up "${2:-3}" ;;
down) need; down; echo "ssh-hosts: removed" ;;
check) need; check ;;
env) env_vars ;;
selftest)
	if [ "$(id -u)" != 0 ]; then
		echo "ssh-hosts: selftest skipped: namespaces, a bridge and firewall rules need root" >&2
		exit 0
	fi
	need
	selftest
	;;
*) die "usage: scripts/ssh-hosts.sh up [N] | check | down | env | selftest" ;;
esac
