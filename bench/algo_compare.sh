#!/usr/bin/env bash
# Compares the cost model's choice with forced algorithms on one allreduce sweep:
# all_reduce_perf under braidrun once per NCCL_ALGO setting, rounds alternating,
# each size keeping its best out-of-place time (noise only ever adds time).
#   bench/algo_compare.sh [-n RANKS] [-r ROUNDS] [-a "auto ring rd hd tree"] [BUILD] -- PERF_ARGS
# Example: bench/algo_compare.sh -n 4 -r 3 build -- -b 8 -e 4K -f 8 -n 2000 -w 100
set -euo pipefail
RANKS=4 ROUNDS=3 ALGOS="auto ring rd" BUILD=build
while (($#)); do
  case "$1" in
    -n) RANKS=$2; shift 2 ;;
    -r) ROUNDS=$2; shift 2 ;;
    -a) ALGOS=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n 2,6p "$0"; exit 0 ;;
    *) BUILD=$1; shift ;;
  esac
done
PERF_ARGS=("$@")
[ ${#PERF_ARGS[@]} -gt 0 ] || PERF_ARGS=(-b 8 -e 4K -f 8 -n 2000 -w 100)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for ((r = 1; r <= ROUNDS; r++)); do
  for a in $ALGOS; do
    if [ "$a" = auto ]; then unset NCCL_ALGO; else export NCCL_ALGO=$a; fi
    # A wrong result must not hide behind a best time: -c 1 and #wrong kept.
    "$BUILD/bench/braidrun" -n "$RANKS" "$BUILD/bench/all_reduce_perf" -c 1 "${PERF_ARGS[@]}" 2>/dev/null |
      awk -v a="$a" '/^ +[0-9]/ {print a, $1, $6, $9}' >> "$OUT/runs"
  done
done
unset NCCL_ALGO
echo "# algo_compare: $RANKS ranks, $ROUNDS rounds, all_reduce_perf ${PERF_ARGS[*]}, $(date -u '+%F %H:%M UTC')"
echo "# best out-of-place time (us) per size; auto = the cost model's choice"
awk -v algos="$ALGOS" '
  { key = $1 SUBSEP $2; if (!(key in best) || $3 < best[key]) best[key] = $3;
    if ($4 != "0") wrong[$1] += $4; sizes[$2] = 1 }
  END {
    n = split(algos, A, " ");
    printf "| %10s |", "size"; for (i = 1; i <= n; i++) printf " %9s |", A[i]; printf "\n";
    printf "|-----------:|"; for (i = 1; i <= n; i++) printf "----------:|"; printf "\n";
    m = 0; for (s in sizes) S[++m] = s + 0;
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (S[j] < S[i]) { t = S[i]; S[i] = S[j]; S[j] = t }
    for (k = 1; k <= m; k++) {
      printf "| %10d |", S[k];
      for (i = 1; i <= n; i++) printf " %9s |", best[A[i] SUBSEP S[k]];
      printf "\n";
    }
    for (i = 1; i <= n; i++) if (wrong[A[i]] > 0) { printf "WRONG: %s had %d wrong elements\n", A[i], wrong[A[i]]; bad = 1 }
    exit bad
  }' "$OUT/runs"
