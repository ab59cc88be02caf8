#!/usr/bin/env bash
# Same-run A/B of two builds of braid: all_reduce_perf of build A and build B
# alternating, R rounds, each size's best out-of-place (or in-place) time kept per build;
# prints time A, time B and B/A per size (below 1: B is faster).
# Usage: bench/ab_builds.sh BUILD_A BUILD_B [--ranks N] [--mode shm|tcp|netns]
#                           [--rounds R] [--min S] [--max S]
#                           [--env-a VAR=VALUE]... [--env-b VAR=VALUE]...
#                           [--rate RATE] [--datatype T] [--in-place]
# --env-a/--env-b set a variable for one side's runs only: with the same build
# twice, an A/B of a setting (e.g. --env-b BRAID_WIRE_TYPE=bf16).
# --rate (netns only) limits each direction of the veth pair to RATE with a
# token bucket (tc tbf, e.g. 10gbit): a link slower than this guest's memory,
# as a NIC between two hosts is. --datatype: all_reduce_perf's -d (default float).
# --in-place: the in-place times instead of the out-of-place ones.
# netns: ranks alternate between two network namespaces joined by a veth pair
# (two "hosts", TCP between them; needs root and iproute2).
set -euo pipefail
A=$1 B=$2; shift 2
RANKS=2 MODE=shm ROUNDS=2 MIN=8 MAX=64M
ENV_A=() ENV_B=() RATE= DTYPE=float COLUMN=6 PLACE=out-of-place
while (($#)); do
  case "$1" in
    --ranks) RANKS=$2; shift 2 ;;
    --mode) MODE=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --min) MIN=$2; shift 2 ;;
    --max) MAX=$2; shift 2 ;;
    --env-a) ENV_A+=("$2"); shift 2 ;;
    --env-b) ENV_B+=("$2"); shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --datatype) DTYPE=$2; shift 2 ;;
    --in-place) COLUMN=10 PLACE=in-place; shift ;;
    *) echo "ab_builds.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d)
trap 'rm -rf "$out"; [ "$MODE" = netns ] && { ip netns del braidabA; ip netns del braidabB; } 2>/dev/null || true' EXIT
if [ "$MODE" = netns ]; then
  ip netns add braidabA; ip netns add braidabB
  ip link add abva netns braidabA type veth peer name abvb netns braidabB
  ip -n braidabA addr add 10.78.0.1/24 dev abva; ip -n braidabB addr add 10.78.0.2/24 dev abvb
  for n in braidabA braidabB; do ip -n $n link set lo up; done
  ip -n braidabA link set abva up; ip -n braidabB link set abvb up
  if [ -n "$RATE" ]; then
    tc -n braidabA qdisc add dev abva root tbf rate "$RATE" burst 4mb latency 50ms
    tc -n braidabB qdisc add dev abvb root tbf rate "$RATE" burst 4mb latency 50ms
  fi
fi
run() {  # build, output file, VAR=VALUE...
  local bench=$1/bench out=$2 args=(-b "$MIN" -e "$MAX" -f 2 -c 0 -d "$DTYPE" --memory host)
  shift 2
  [ $# -gt 0 ] && export "$@"
  case "$MODE" in
    shm) BRAID_PROGRESS=0 "$bench/braidrun" -n "$RANKS" "$bench/all_reduce_perf" "${args[@]}" ;;
    tcp) NCCL_SHM_DISABLE=1 BRAID_PROGRESS=0 "$bench/braidrun" -n "$RANKS" "$bench/all_reduce_perf" "${args[@]}" ;;
    netns) BRAID_PROGRESS=0 "$bench/braidrun" -n "$RANKS" sh -c 'export NCCL_COMM_ID=10.78.0.1:29878
      [ $((BRAID_RANK % 2)) = 0 ] && ns=braidabA || ns=braidabB; exec ip netns exec $ns "$@"' sh \
      "$bench/all_reduce_perf" "${args[@]}" ;;
  esac >"$out" 2>&1
}
# A sweep of 8 ranks takes minutes: one line per round and build on stderr.
for r in $(seq "$ROUNDS"); do
  for side in a b; do
    start=$(date +%s)
    if [ $side = a ]; then (run "$A" "$out/a$r" ${ENV_A[@]+"${ENV_A[@]}"}); else (run "$B" "$out/b$r" ${ENV_B[@]+"${ENV_B[@]}"}); fi
    echo "ab_builds: $MODE, $RANKS ranks: round $r/$ROUNDS, build $(echo $side | tr ab AB): $(($(date +%s) - start)) s" >&2
  done
done
best() { cat "$out"/$1* | awk -v c="$COLUMN" '/^ +[0-9]/ { if (!($1 in t) || $c < t[$1]) t[$1] = $c } END { for (s in t) print s, t[s] }' | sort -n; }
join <(best a) <(best b) | awk -v mode="$MODE" -v n="$RANKS" -v place="$PLACE" '
  BEGIN { printf "%s, %d ranks: best %s time (us)\n%12s %12s %12s %8s\n", mode, n, place, "bytes", "A", "B", "B/A" }
  { printf "%12d %12.2f %12.2f %8.3f\n", $1, $2, $3, $3 / $2 }'
