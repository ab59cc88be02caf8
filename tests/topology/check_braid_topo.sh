#!/bin/sh
# Runs braid-topo on this machine and checks what it prints against the
# machine's own view (getconf, nproc, /sys).
set -u
bin="$1"
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$out"; exit 1; }
out=$(mktemp); trap 'rm -f "$out"' EXIT

"$bin" -n 4 --hosts 2 > "$out" 2>&1 || fail "braid-topo exited $?"

online=$(sed -n 's/^cpus: \([0-9]*\) online.*/\1/p' "$out")
usable=$(sed -n 's/.* \([0-9]*\) usable by this process.*/\1/p' "$out")
[ "$online" = "$(getconf _NPROCESSORS_ONLN)" ] || fail "online cpus $online, getconf says $(getconf _NPROCESSORS_ONLN)"
[ "$usable" = "$(nproc)" ] || fail "usable cpus $usable, nproc says $(nproc)"
[ "$(grep -c '^  cpu [0-9]*: package' "$out")" = "$online" ] || fail "one line per online cpu expected"

nodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)
grep -q "^numa nodes: $nodes\$" "$out" || fail "expected $nodes numa nodes"
ifs=$(ls /sys/class/net | wc -l)
grep -q "^interfaces: $ifs\$" "$out" || fail "expected $ifs interfaces"
if [ -d /sys/class/infiniband ] && [ -n "$(ls /sys/class/infiniband)" ]; then
  grep -q '^infiniband devices: [0-9]' "$out" || fail "infiniband devices not listed"
else
  grep -q '^infiniband devices: none$' "$out" || fail "expected no infiniband devices"
fi
grep -q '^bootstrap/tcp interface' "$out" || fail "no bootstrap interface line"
grep -Eq '^braid-topo: backend (sysfs|hwloc)' "$out" || fail "header does not name the backend"

# 4 ranks on 2 hosts, one process each: self inproc, same host shm (or p2p*), other host tcp (or ib*).
row0=$(sed -n 's/^       0 \(.*\)/\1/p' "$out" | tail -1)
set -- $row0
[ "$1" = inproc ] || fail "rank 0 to itself: $1"
case "$2" in shm|p2p\*) ;; *) fail "rank 0 to 1 (same host): $2";; esac
case "$3" in tcp|ib\*) ;; *) fail "rank 0 to 2 (other host): $3";; esac

"$bin" --sysfs /nonexistent/sysfs > /dev/null 2>&1; rc=$?
[ $rc = 1 ] || fail "missing sysfs root: exit $rc, expected 1"
"$bin" -n 0 > /dev/null 2>&1; rc=$?
[ $rc = 2 ] || fail "bad -n: exit $rc, expected 2"
BRAID_TOPO=sysfs "$bin" > "$out" 2>&1 || fail "BRAID_TOPO=sysfs braid-topo exited $?"
grep -q '^braid-topo: backend sysfs, machine read from /sys$' "$out" || fail "BRAID_TOPO=sysfs not honoured"
echo "braid-topo output is consistent with this machine ($online cpus, $nodes numa node(s))"
