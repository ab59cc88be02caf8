#!/bin/sh
# braidrun_test.sh BRAIDRUN: the launcher's contract, with sh as the ranks.
set -u
braidrun=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "braidrun_test: FAIL: $*" >&2
  exit 1
}

# 1. Every rank gets its own rank, the world size and one shared NCCL_COMM_ID.
"$braidrun" -n 3 sh -c 'echo "$BRAID_RANK $BRAID_WORLD_SIZE $BRAID_LOCAL_RANK $BRAID_LOCAL_SIZE $NCCL_COMM_ID"' \
  > "$dir/env.txt" || fail "all-success job returned $?"
[ "$(sort "$dir/env.txt" | cut -d' ' -f1-4 | tr '\n' ,)" = "0 3 0 3,1 3 1 3,2 3 2 3," ] ||
  fail "rank variables wrong: $(cat "$dir/env.txt")"
[ "$(cut -d' ' -f5 "$dir/env.txt" | sort -u | wc -l)" -eq 1 ] || fail "ranks got different NCCL_COMM_ID"
grep -q ' 127\.0\.0\.1:[0-9][0-9]*$' "$dir/env.txt" || fail "NCCL_COMM_ID is not 127.0.0.1:<port>"

# 2. A failing rank's exit status comes back, and the others are stopped.
start=$(date +%s)
"$braidrun" -n 3 --grace 1 sh -c '
  echo $$ > "'"$dir"'/pid.$BRAID_RANK"
  if [ "$BRAID_RANK" = 1 ]; then sleep 0.3; exit 7; fi
  exec sleep 60' 2> "$dir/err.txt"
rc=$?
elapsed=$(( $(date +%s) - start ))
[ "$rc" -eq 7 ] || fail "expected exit status 7, got $rc"
[ "$elapsed" -le 10 ] || fail "took ${elapsed}s: the other ranks were not stopped"
grep -q 'rank 1 .*exited with status 7' "$dir/err.txt" || fail "no message naming rank 1: $(cat "$dir/err.txt")"
for f in "$dir"/pid.*; do
  if kill -0 "$(cat "$f")" 2>/dev/null; then fail "rank $(basename "$f") still alive"; fi
done

# 3. A rank killed by a signal: 128+signal, even when the others ignore SIGTERM.
"$braidrun" -n 2 --grace 0.5 sh -c '
  trap "" TERM
  if [ "$BRAID_RANK" = 0 ]; then sleep 0.2; kill -SEGV $$; fi
  sleep 60' 2> "$dir/err2.txt"
rc=$?
[ "$rc" -eq 139 ] || fail "expected 139 for SIGSEGV, got $rc"
grep -q 'rank 0 .*signal 11' "$dir/err2.txt" || fail "no message naming the signal: $(cat "$dir/err2.txt")"

# 4. A program that cannot start: 127 and a message.
"$braidrun" -n 2 /nonexistent/program 2> "$dir/err3.txt"
rc=$?
[ "$rc" -eq 127 ] || fail "expected 127 for a missing program, got $rc"
grep -q "cannot start '/nonexistent/program'" "$dir/err3.txt" || fail "no message for the missing program"

# 5. --tag-output prefixes every line with its rank.
"$braidrun" -n 2 --tag-output sh -c 'echo hello; echo oops >&2' > "$dir/tag.txt" 2>&1 || fail "tagged job failed"
[ "$(grep -c '^\[[01]\] hello$' "$dir/tag.txt")" -eq 2 ] || fail "untagged output: $(cat "$dir/tag.txt")"
[ "$(grep -c '^\[[01]\] oops$' "$dir/tag.txt")" -eq 2 ] || fail "untagged stderr: $(cat "$dir/tag.txt")"

# 6. SIGTERM to braidrun reaches every rank; braidrun reports 128+15.
rm -f "$dir"/pid.*
"$braidrun" -n 2 sh -c 'echo $$ > "'"$dir"'/pid.$BRAID_RANK"; exec sleep 60' 2> /dev/null &
launcher=$!
tries=0
while [ "$(ls "$dir" | grep -c '^pid\.')" -lt 2 ] && [ "$tries" -lt 50 ]; do sleep 0.1; tries=$((tries + 1)); done
kill -TERM "$launcher"
wait "$launcher"
rc=$?
[ "$rc" -eq 143 ] || fail "expected 143 after SIGTERM, got $rc"
for f in "$dir"/pid.*; do
  if kill -0 "$(cat "$f")" 2>/dev/null; then fail "rank $(basename "$f") survived SIGTERM to braidrun"; fi
done

echo "braidrun_test: PASS"
