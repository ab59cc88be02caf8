#!/bin/sh
# Every collective's perf tool with its ranks laid out as the options say
# (-t threads, -g ranks a thread), checked: each run must pass, say where its
# ranks come from, and count no wrong element.
#   rank_layout_test.sh <tool dir> <braidrun> <processes> '<expected "Ranks:" line>' <options...>
# One process: the tool alone; more: under braidrun -n <processes>.
dir=$1 braidrun=$2 procs=$3 expect=$4
shift 4
for t in all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf alltoall_perf sendrecv_perf; do
  if [ "$procs" = 1 ]; then
    out=$("$dir/$t" "$@" -b 8 -e 64K -f 16 -n 2 -w 1 -c 1 --memory host) || { echo "$out"; exit 1; }
  else
    out=$("$braidrun" -n "$procs" "$dir/$t" "$@" -b 8 -e 64K -f 16 -n 2 -w 1 -c 1 --memory host) ||
      { echo "$out"; exit 1; }
  fi
  echo "$out" | grep -qF "$expect" || { echo "$t: no line '$expect':"; echo "$out"; exit 1; }
  echo "$out" | grep -q 'Out of bounds values : 0 OK' || { echo "$out"; exit 1; }
done
