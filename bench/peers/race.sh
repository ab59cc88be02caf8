#!/usr/bin/env bash
# Races braid's all_reduce_perf against its peers on this host, in one go so
# the numbers share one machine state:
#   shm race: braid (default transports: shm between processes) vs Open MPI's
#             MPI_Allreduce (btl self,vader: shared memory)
#   tcp race: braid with NCCL_SHM_DISABLE=1 (TCP) vs Gloo's TCP transport
# Float32 sum, out-of-place columns, the same -b/-e/-f/-n/-w for everybody.
# Prints one table per race with the ratios braid/peer and a verdict line per
# target of the peers issue. Builds nothing: build first with
#   cmake --build BUILD -j2 --target peers
usage() {
  cat <<'EOF'
Usage: bench/peers/race.sh [options] [BUILD_DIR]     (BUILD_DIR default: build)
  --ranks N       processes per race (default 2)
  --mode M        shm | tcp | both (default both)
  --min S --max S smallest / largest size, K/M/G suffixes (default 8 / 64M)
  --factor F      size step factor (default 2); --quick is --factor 4
  --iters N       timed iterations per size (default 20)
  --warmup N      warm-up iterations (default 5)
  --check N       result checks per size, 0 = off (default 1)
  --rounds R      run every program R times, alternating, and keep each size's
                  best time (default 1)
  --tcp-bound G   busbw bound of a 2-rank TCP allreduce on this host in GB/s
                  (default 1.65): the tcp target is min(3x Gloo, 90% of it)
  --keep DIR      keep the raw outputs in DIR
EOF
}
set -euo pipefail

RANKS=2 MODE=both MIN=8 MAX=64M FACTOR=2 ITERS=20 WARMUP=5 CHECK=1 ROUNDS=1 TCP_BOUND=1.65 KEEP="" BUILD=build
while (($#)); do
  case "$1" in
    --ranks) RANKS=$2; shift 2 ;;
    --mode) MODE=$2; shift 2 ;;
    --min) MIN=$2; shift 2 ;;
    --max) MAX=$2; shift 2 ;;
    --factor) FACTOR=$2; shift 2 ;;
    --quick) FACTOR=4; shift ;;
    --iters) ITERS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --check) CHECK=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --tcp-bound) TCP_BOUND=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "race.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) BUILD=$1; shift ;;
  esac
done
case "$MODE" in shm|tcp|both) ;; *) echo "race.sh: --mode shm|tcp|both" >&2; exit 2 ;; esac

BENCH=$BUILD/bench
BRAIDRUN=$BENCH/braidrun
BRAID_TOOL=$BENCH/all_reduce_perf
MPI_TOOL=$BENCH/peers/mpi_allreduce_perf
GLOO_TOOL=$BENCH/peers/gloo_allreduce_perf
need() {
  [[ -x $1 ]] && return 0
  echo "race.sh: $1 is missing: cmake --build $BUILD -j2 --target peers" \
       "(the peers need libopenmpi-dev / libgloo-dev)" >&2
  exit 2
}
need "$BRAIDRUN"; need "$BRAID_TOOL"
[[ $MODE == tcp ]] || need "$MPI_TOOL"
[[ $MODE == shm ]] || need "$GLOO_TOOL"
if [[ $MODE != tcp ]] && ! command -v mpirun >/dev/null; then
  echo "race.sh: mpirun not found (openmpi-bin)" >&2; exit 2
fi

if [[ -n $KEEP && -d $KEEP && -n $(ls -A "$KEEP") ]]; then
  echo "race.sh: --keep $KEEP is not empty (its old tables would join this race)" >&2; exit 2
fi
OUT=${KEEP:-$(mktemp -d)}
mkdir -p "$OUT"
[[ -n $KEEP ]] || trap 'rm -rf "$OUT"' EXIT
WRONG=0
SWEEP=(-b "$MIN" -e "$MAX" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" -c "$CHECK")
HZ=$(getconf CLK_TCK)  # /proc/stat counts in these
LIMIT=600  # seconds per program run: a hung peer must not hang the race

# Open MPI refuses root unless told; the race is often run in containers.
if [[ $(id -u) == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

run_braid_shm() { env -u NCCL_SHM_DISABLE timeout "$LIMIT" "$BRAIDRUN" -n "$RANKS" "$BRAID_TOOL" "${SWEEP[@]}"; }
run_braid_tcp() { NCCL_SHM_DISABLE=1 timeout "$LIMIT" "$BRAIDRUN" -n "$RANKS" "$BRAID_TOOL" "${SWEEP[@]}"; }
run_mpi() {
  timeout "$LIMIT" mpirun -np "$RANKS" --oversubscribe --bind-to none --mca btl self,vader \
    "$MPI_TOOL" "${SWEEP[@]}"
}
run_gloo() {
  local store rc=0
  store=$(mktemp -d)
  GLOO_PERF_STORE=$store timeout "$LIMIT" "$BRAIDRUN" -n "$RANKS" "$GLOO_TOOL" "${SWEEP[@]}" || rc=$?
  rm -rf "$store"
  return $rc
}

# run NAME FUNCTION ROUND: one program's table into $OUT/NAME.ROUND.txt. Says
# how long it took and how much CPU other processes took meanwhile (busy time
# of the whole machine less the CPU time of the run itself), which spoils a race.
run() {
  local name=$1 fn=$2 round=$3 t0 t1 s0 s1 cpu rc=0 TIMEFORMAT='%U %S'
  s0=$(head -n1 /proc/stat); t0=$(date +%s.%N)
  { time "$fn" >"$OUT/$name.$round.txt" 2>"$OUT/$name.$round.err"; } 2>"$OUT/$name.$round.cpu" || rc=$?
  t1=$(date +%s.%N); s1=$(head -n1 /proc/stat)
  if ((rc != 0)); then
    echo "race.sh: $name failed (status $rc); its output:" >&2
    tail -n 20 "$OUT/$name.$round.txt" "$OUT/$name.$round.err" >&2
    exit 1
  fi
  cpu=$(tail -n1 "$OUT/$name.$round.cpu")
  awk -v n="$name" -v r="$round" -v t0="$t0" -v t1="$t1" -v a="$s0" -v b="$s1" -v cpu="$cpu" -v hz="$HZ" 'BEGIN {
    split(a, x); split(b, y); for (i = 2; i <= 9; i++) { d = y[i] - x[i]; if (i != 5 && i != 6) busy += d }
    split(cpu, c); wall = t1 - t0; others = busy / hz - c[1] - c[2]; if (others < 0) others = 0
    printf "#   %-10s round %d: %5.1f s, others used %3.0f%% of a core meanwhile\n", n, r, wall, 100 * others / wall }'
}

# best NAME: "size time busbw wrong" per size, best time over the rounds.
best() {
  awk '!/^#/ && NF >= 9 {
         s = $1; t = $6 + 0; b = $8 + 0; w = $9
         if (!(s in time) || t < time[s]) { time[s] = t; bw[s] = b }
         if (w != "N/A" && w + 0 > 0) bad[s] += w
         if (!(s in seen)) { seen[s] = 1; order[++n] = s }
       }
       END { for (i = 1; i <= n; i++) { s = order[i]; print s, time[s], bw[s], bad[s] + 0 } }' \
      "$OUT/$1".*.txt
}

human() {  # bytes -> 8B, 64K, 1M
  awk -v b="$1" 'BEGIN { if (b >= 1048576 && b % 1048576 == 0) printf "%dM", b / 1048576;
                         else if (b >= 1024 && b % 1024 == 0) printf "%dK", b / 1024; else printf "%dB", b }'
}

# table RACE PEER: joins braid's and the peer's best rows and prints the table.
# busbw is recomputed from the time (the tools round it to 0.01 GB/s), so the
# busbw ratio braid/peer equals the time ratio peer/braid: same bytes moved.
# Leaves "size braid_us peer_us braid_busbw peer_busbw" rows in $OUT/RACE.rows.
table() {
  local race=$1 peer=$2
  best "braid-$race" >"$OUT/braid-$race.best"
  best "$peer-$race" >"$OUT/$peer-$race.best"
  join <(sort -k1,1 "$OUT/braid-$race.best") <(sort -k1,1 "$OUT/$peer-$race.best") | sort -n -k1,1 |
    awk -v n="$RANKS" '{ f = 2 * (n - 1) / n
      bb = $2 > 0 ? $1 * f / $2 / 1e3 : 0; pb = $5 > 0 ? $1 * f / $5 / 1e3 : 0
      print $1, $2, $5, bb, pb, $4, $7 }' >"$OUT/$race.rows"
  echo
  echo "## $race race, $RANKS ranks: braid vs $peer (float32 sum, out of place)"
  echo
  printf '| %6s | %10s | %10s | %12s | %12s | %18s |\n' size "braid (us)" "$peer (us)" \
    "braid busbw" "$peer busbw" "braid/$peer busbw"
  printf '|%s|%s|%s|%s|%s|%s|\n' "-------:" "-----------:" "-----------:" "-------------:" \
    "-------------:" "-------------------:"
  while read -r size bt pt bb pb bwrong pwrong; do
    awk -v h="$(human "$size")" -v bt="$bt" -v pt="$pt" -v bb="$bb" -v pb="$pb" 'BEGIN {
      r = bt > 0 ? sprintf("%.2fx", pt / bt) : "-"
      printf "| %6s | %10.2f | %10.2f | %8.3f GB/s | %8.3f GB/s | %18s |\n", h, bt, pt, bb, pb, r }'
    if ((bwrong > 0 || pwrong > 0)); then
      echo "race.sh: WRONG RESULTS at $size B: braid $bwrong, $peer $pwrong" >&2
      WRONG=1
    fi
  done <"$OUT/$race.rows"
}

# verdict LABEL ROWS LO HI MIN_RATIO [CAP]: braid busbw >= MIN_RATIO x peer's
# (or >= CAP when that is lower) at every size in [LO, HI].
verdict_bw() {
  awk -v label="$1" -v lo="$3" -v hi="$4" -v want="$5" -v cap="${6:-0}" '
    $1 >= lo && $1 <= hi {
      n++; need = want * $5; if (cap > 0 && need > cap) need = cap
      r = $5 > 0 ? $4 / $5 : 0
      if ($4 < need) { miss++; misses = misses sprintf(" %s(%.2fx, %.2f<%.2f)", $1, r, $4, need) }
      if (n == 1 || r < minr) { minr = r; mins = $1 }
    }
    END {
      if (n == 0) { printf "VERDICT %s: not measured (no size in range)\n", label; exit }
      if (!miss) printf "VERDICT %s: HOLDS at all %d sizes (lowest ratio %.2fx at %d B)\n", label, n, minr, mins
      else printf "VERDICT %s: MISSED at %d of %d sizes (lowest ratio %.2fx at %d B):%s\n", label, miss, n, minr, mins, misses
    }' "$2"
}

# verdict_lat LABEL ROWS FACTOR: braid's 8 B time <= FACTOR x the peer's.
verdict_lat() {
  awk -v label="$1" -v f="$3" '$1 == 8 { found = 1
      if ($2 <= f * $3) printf "VERDICT %s: HOLDS (braid %.2f us, peer %.2f us, limit %.2f us)\n", label, $2, $3, f * $3
      else printf "VERDICT %s: MISSED (braid %.2f us, peer %.2f us, limit %.2f us: %.2fx over)\n", label, $2, $3, f * $3, $2 / (f * $3) }
    END { if (!found) printf "VERDICT %s: not measured (the sweep does not start at 8 B)\n", label }' "$2"
}

# The machine is shared: say how busy it was around the race (the CPU time
# others used over one second; a race needs the cores to itself).
machine_state() {
  local a b
  a=$(head -n1 /proc/stat); sleep 1; b=$(head -n1 /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN { split(a, x); split(b, y); for (i = 2; i <= 9; i++) {
      d = y[i] - x[i]; t += d; if (i == 5 || i == 6) idle += d }
    printf "cores %.0f%% busy over 1 s, ", (t > 0 ? 100 * (t - idle) / t : 0) }'
  echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

echo "# race.sh: $RANKS ranks, mode $MODE, sizes $MIN..$MAX factor $FACTOR, -n $ITERS -w $WARMUP -c $CHECK," \
     "rounds $ROUNDS"
echo "# host: $(hostname), $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "# build: $BUILD"
echo "# before: $(machine_state)"
if [[ $MODE != tcp ]]; then
  for ((r = 1; r <= ROUNDS; r++)); do run braid-shm run_braid_shm $r; run ompi-shm run_mpi $r; done
fi
if [[ $MODE != shm ]]; then
  for ((r = 1; r <= ROUNDS; r++)); do run braid-tcp run_braid_tcp $r; run gloo-tcp run_gloo $r; done
fi
echo "# after: $(machine_state)"
for f in "$OUT"/*.1.txt; do
  grep -m1 '^# Library' "$f" | sed "s|^# Library:|#   $(basename "$f" .1.txt):|"
done

if [[ $MODE != tcp ]]; then
  table shm ompi
  echo
  if ((RANKS == 2)); then
    verdict_bw "shm busbw >= 1.5x Open MPI at 64K..64M" "$OUT/shm.rows" 65536 67108864 1.5
    verdict_lat "shm 8 B time <= Open MPI's" "$OUT/shm.rows" 1
  else
    verdict_bw "shm busbw >= Open MPI at every size ($RANKS ranks)" "$OUT/shm.rows" 0 1e30 1
    verdict_bw "shm busbw >= Open MPI at 64K..64M ($RANKS ranks)" "$OUT/shm.rows" 65536 67108864 1
  fi
fi
if [[ $MODE != shm ]]; then
  table tcp gloo
  echo
  if ((RANKS == 2)); then
    cap=$(awk -v b="$TCP_BOUND" 'BEGIN { print 0.9 * b }')
    verdict_bw "tcp busbw >= min(3x Gloo, 90% of $TCP_BOUND GB/s) at 1M and up" "$OUT/tcp.rows" \
      1048576 1e30 3 "$cap"
    verdict_lat "tcp 8 B time <= 1/10 of Gloo's" "$OUT/tcp.rows" 0.1
  else
    verdict_bw "tcp busbw >= Gloo at every size ($RANKS ranks, no issue target)" "$OUT/tcp.rows" 0 1e30 1
  fi
fi
exit $((WRONG ? 1 : 0))
