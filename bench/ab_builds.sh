#!/usr/bin/env bash
# Same-run A/B of two builds of braid: all_reduce_perf of build A and build B
# alternating, R rounds, each size's best out-of-place (or in-place) time kept per build;
# prints time A, time B and B/A per size (below 1: B is faster), and the lowest,
# median and highest of each round's own B/A.
# Usage: bench/ab_builds.sh BUILD_A BUILD_B [--ranks N] [--mode shm|tcp|netns]
#                           [--rounds R] [--min S] [--max S]
#                           [--env-a VAR=VALUE]... [--env-b VAR=VALUE]...
#                           [--rate RATE] [--datatype T] [--in-place]
#                           [--tools BUILD] [--iters N]
# --env-a/--env-b set a variable for one side's runs only: with the same build
# twice, an A/B of a setting (e.g. --env-b BRAID_WIRE_TYPE=bf16).
# --rate (netns only) limits each direction of the veth pair to RATE with a
# token bucket (tc tbf, e.g. 10gbit): a link slower than this guest's memory,
# as a NIC between two hosts is. --datatype: all_reduce_perf's -d (default float).
# --in-place: the in-place times instead of the out-of-place ones.
# --tools BUILD: both sides run BUILD's braidrun and all_reduce_perf, and only
# the library differs (LD_LIBRARY_PATH=BUILD_A or BUILD_B): an A/B of libraries
# whose own perf tools changed too.
# --iters N: all_reduce_perf's -n (timed calls per size; its default 20 makes
# a run of the small sizes a window of some 15 us, at the mercy of one
# descheduling).
# The rounds alternate the order (A B, B A, A B, ...): on this kind of guest the
# second of two back-to-back runs is often a few percent faster.
# netns: ranks alternate between two network namespaces joined by a veth pair
# (two "hosts", TCP between them; needs root and iproute2).
set -euo pipefail
A=$1 B=$2; shift 2
RANKS=2 MODE=shm ROUNDS=2 MIN=8 MAX=64M
ENV_A=() ENV_B=() RATE= DTYPE=float COLUMN=6 PLACE=out-of-place TOOLS= ITERS=
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
    --tools) TOOLS=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
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
  [ -n "$ITERS" ] && args+=(-n "$ITERS")
  if [ -n "$TOOLS" ]; then
    bench=$TOOLS/bench
    export LD_LIBRARY_PATH=$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
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
  order="a b"; [ $((r % 2)) = 0 ] && order="b a"
  for side in $order; do
    start=$(date +%s)
    if [ $side = a ]; then (run "$A" "$out/a$r" ${ENV_A[@]+"${ENV_A[@]}"}); else (run "$B" "$out/b$r" ${ENV_B[@]+"${ENV_B[@]}"}); fi
    echo "ab_builds: $MODE, $RANKS ranks: round $r/$ROUNDS, build $(echo $side | tr ab AB): $(($(date +%s) - start)) s" >&2
  done
done
best() { cat "$out"/$1* | awk -v c="$COLUMN" '/^ +[0-9]/ { if (!($1 in t) || $c < t[$1]) t[$1] = $c } END { for (s in t) print s, t[s] }' | sort -n; }
# Each round's B/A per size (the two runs of a round are next to each other in
# time): their lowest, median and highest. A range that spans 1 is this
# guest's noise; a difference beyond it shows in every round.
rounds() {
  for r in $(seq "$ROUNDS"); do
    join <(awk -v c="$COLUMN" '/^ +[0-9]/ { print $1, $c }' "$out/a$r" | sort -n) \
         <(awk -v c="$COLUMN" '/^ +[0-9]/ { print $1, $c }' "$out/b$r" | sort -n)
  done | awk '{ n[$1]++; v[$1, n[$1]] = $3 / $2 }
    END { for (s in n) { k = n[s]
            for (i = 2; i <= k; i++) for (j = i; j > 1 && v[s, j - 1] > v[s, j]; j--) { x = v[s, j]; v[s, j] = v[s, j - 1]; v[s, j - 1] = x }
            m = k % 2 ? v[s, (k + 1) / 2] : (v[s, k / 2] + v[s, k / 2 + 1]) / 2
            print s, v[s, 1], m, v[s, k] } }' | sort -n
}
join <(join <(best a) <(best b)) <(rounds) | awk -v mode="$MODE" -v n="$RANKS" -v place="$PLACE" '
  BEGIN { printf "%s, %d ranks: best %s time (us); B/A of each round: lowest, median, highest\n%12s %12s %12s %8s %8s %8s %8s\n",
          mode, n, place, "bytes", "A", "B", "B/A", "low", "median", "high" }
  { printf "%12d %12.2f %12.2f %8.3f %8.3f %8.3f %8.3f\n", $1, $2, $3, $3 / $2, $4, $5, $6 }'
