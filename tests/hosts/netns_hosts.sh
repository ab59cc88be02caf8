#!/bin/sh
# Several hosts for real: every "host" is a network namespace, joined to the
# others by veth links on a bridge (itself in a namespace, so the machine's own
# network is untouched). braid takes the host identity from the network
# namespace, so ranks of one namespace must use shared memory between them and
# TCP to every other namespace. Runs each perf tool with -c 1 across the hosts
# and checks both the results and the transport chosen for every pair.
# Usage: netns_hosts.sh HOSTS RANKS_PER_HOST BRAIDRUN TOOLS_DIR [block|interleaved]
# block: rank r lives on host r / RANKS_PER_HOST; interleaved: on host r % HOSTS,
# and the rings must then be reordered so that each host's ranks are adjacent.
# Exit 77 (skip) where namespaces cannot be made (no privilege, no iproute2).
set -u
HOSTS=$1 PER=$2 BRAIDRUN=$3 TOOLS=$4 PLACE=${5:-block}
N=$((HOSTS * PER))
TAG=$$
SW=bsw$TAG
NET=10.$((TAG % 200 + 20)).$((TAG / 200 % 250)).
cleanup() {
  for h in $(seq 0 $((HOSTS - 1))); do ip netns del bh${TAG}_$h 2>/dev/null; done
  ip netns del $SW 2>/dev/null
  rm -f "$OUT" "$ERR"
}
OUT=$(mktemp) ERR=$(mktemp)
trap cleanup EXIT
command -v ip >/dev/null || { echo "skip: iproute2 (ip) is not installed"; exit 77; }
ip netns add $SW 2>/dev/null || { echo "skip: cannot create network namespaces (needs root / CAP_SYS_ADMIN)"; exit 77; }
ip -n $SW link add br0 type bridge || { echo "skip: no bridge support"; exit 77; }
ip -n $SW link set br0 up
for h in $(seq 0 $((HOSTS - 1))); do
  ns=bh${TAG}_$h
  ip netns add $ns
  ip link add v${TAG}h$h type veth peer name eth0 netns $ns
  ip link set v${TAG}h$h netns $SW
  ip -n $SW link set v${TAG}h$h master br0 up
  ip -n $ns addr add ${NET}$((h + 1))/24 dev eth0
  ip -n $ns link set eth0 up
  ip -n $ns link set lo up
done

# Rank 0's host (host 0 in both placements) serves the rendezvous.
if [ "$PLACE" = interleaved ]; then HOST_OF="% $HOSTS"; else HOST_OF="/ $PER"; fi
run() {
  tool=$1; shift
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT BRAID_PROGRESS=0 "$BRAIDRUN" -n $N sh -c '
    export NCCL_COMM_ID='"${NET}"'1:29611 NCCL_SOCKET_IFNAME=eth0
    exec ip netns exec bh'"${TAG}"'_$((BRAID_RANK '"$HOST_OF"')) "$@"' sh "$TOOLS/$tool" "$@" >"$OUT" 2>"$ERR"
}

fail=0
for tool in all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf reduce_perf alltoall_perf \
            sendrecv_perf gather_perf scatter_perf; do
  run $tool -b 8 -e 1M -f 32 -n 2 -w 1 -c 1 --memory host
  rc=$?
  rows=$(grep -cE '^ +[0-9]' "$OUT")
  wrong=$(awk '/^ +[0-9]/ && NF == 13 { for (i = 9; i <= 13; i += 4) if ($i != "0" && $i != "N/A") w++ } END { print w + 0 }' "$OUT")
  if [ $rc -ne 0 ] || [ "$rows" -lt 2 ] || [ "$wrong" -ne 0 ]; then
    echo "FAIL: $tool across $HOSTS hosts x $PER ranks: exit $rc, $rows rows, $wrong wrong"
    cat "$OUT"; tail -30 "$ERR"; fail=1; continue
  fi
  # "channel C: rank R <- rank P via T": same host must be shm (or inproc), others tcp.
  bad=$(awk -v per=$PER -v hosts=$HOSTS -v place=$PLACE '/ <- rank / {
      for (i = 1; i <= NF; i++) { if ($i == "rank" && $(i+2) == "<-") r = $(i+1) + 0; if ($i == "<-") p = $(i+2) + 0; if ($i == "via") t = $(i+1) }
      same = place == "interleaved" ? r % hosts == p % hosts : int(r / per) == int(p / per)
      if (r != p && ((same && t != "shm") || (!same && t != "tcp"))) print "rank " r " <- rank " p " via " t
    }' "$ERR" | sort -u)
  pairs=$(grep -c ' <- rank ' "$ERR")
  # Ranks of a host share lane FIFOs in shared memory ("lane FIFO ...
  # (shm)"); connections only bridge hosts.
  shm=$(grep -cE ' via shm|lane FIFO .*\(shm\)' "$ERR") tcp=$(grep -c ' via tcp' "$ERR")
  # Both kinds must really occur where the layout has them.
  [ "$PER" -gt 1 ] && [ "$shm" -eq 0 ] && bad="$bad no shm connection within a host"
  [ "$HOSTS" -gt 1 ] && [ "$tcp" -eq 0 ] && bad="$bad no tcp connection across hosts"
  if [ "$PLACE" = interleaved ] && [ "$PER" -gt 1 ] && ! grep -q 'ring order follows hosts' "$ERR"; then
    bad="$bad rings not reordered to keep hosts contiguous"
  fi
  if [ -n "$bad" ] || [ "$pairs" -eq 0 ]; then
    echo "FAIL: $tool: wrong transports ($pairs connections logged):"; echo "$bad"; fail=1; continue
  fi
  echo "ok: $tool, $rows sizes, $pairs connections ($shm shm within a host, $tcp tcp across)"
done
exit $fail
