#!/bin/sh
# check_perf_output.sh RANKS COMMAND...
# Runs a perf tool (usually under braidrun) and passes only when it exits 0,
# ran on braid with RANKS ranks, printed at least one result row, every
# checked #wrong column is 0 and at least one column was actually checked.
set -u
ranks=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
fail() {
  echo "check_perf_output: FAIL: $*" >&2
  exit 1
}
[ "$rc" -eq 0 ] || fail "exit status $rc"
printf '%s\n' "$out" | grep -q '^# Library: braid' || fail "the tool did not load braid"
printf '%s\n' "$out" | grep -q "^# Ranks: $ranks " || fail "expected $ranks ranks"
printf '%s\n' "$out" | grep -q '^# Out of bounds values : 0 OK' || fail "no clean summary line"
# Result rows: 13 columns, the 9th and 13th are #wrong (a number or N/A).
printf '%s\n' "$out" | awk '
  /^ *[0-9]/ && NF == 13 {
    rows++
    for (i = 9; i <= 13; i += 4) {
      if ($i == "N/A") continue
      checked++
      if ($i != "0") bad++
    }
  }
  END {
    if (rows == 0) { print "no result rows" > "/dev/stderr"; exit 1 }
    if (checked == 0) { print "no result was checked" > "/dev/stderr"; exit 1 }
    if (bad > 0) { print bad " columns with wrong elements" > "/dev/stderr"; exit 1 }
  }' || fail "bad result rows"
echo "check_perf_output: PASS"
