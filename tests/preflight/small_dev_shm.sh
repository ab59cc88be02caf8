#!/bin/sh
# /dev/shm too small for the shared-memory FIFOs (a 1 MiB tmpfs, as in a
# container started without --shm-size): braid must fall back to TCP with a
# warning and still compute correct results, not fail or die of SIGBUS.
# Usage: small_dev_shm.sh BRAIDRUN ALL_REDUCE_PERF. Exit 77 (skip) where a
# private mount namespace cannot be made (not root, no unshare).
set -u
BRAIDRUN=$1 PERF=$2
if ! unshare -m true 2>/dev/null; then echo "skip: cannot unshare a mount namespace"; exit 77; fi
OUT=$(mktemp) ERR=$(mktemp)
trap 'rm -f "$OUT" "$ERR"' EXIT
NCCL_DEBUG=WARN BRAID_PROGRESS=0 unshare -m sh -c '
  mount -t tmpfs -o size=1m tmpfs /dev/shm || exit 77
  exec "$0" -n 2 "$1" -b 8 -e 1M -f 8 -c 1 --memory host' "$BRAIDRUN" "$PERF" >"$OUT" 2>"$ERR"
rc=$?
[ $rc -eq 77 ] && { echo "skip: cannot mount a tmpfs"; exit 77; }
cat "$OUT"
if [ $rc -ne 0 ]; then echo "FAIL: exit $rc"; cat "$ERR"; exit 1; fi
if ! grep -q "/dev/shm is too small" "$ERR" || ! grep -q "using the tcp transport" "$ERR"; then
  echo "FAIL: no fallback warning on stderr:"; cat "$ERR"; exit 1
fi
wrong=$(awk '/^ +[0-9]/ { w += $9 + $13 } END { print w + 0 }' "$OUT")
rows=$(grep -cE '^ +[0-9]' "$OUT")
if [ "$rows" -lt 3 ] || [ "$wrong" -ne 0 ]; then echo "FAIL: $rows rows, $wrong wrong"; exit 1; fi
echo "ok: fell back to TCP, $rows sizes correct"
