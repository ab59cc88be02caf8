#!/usr/bin/env bash
# The block emulation's self-tests: the ThreadSanitizer build must report a
# data race for a broken case (by default blocks whose barriers do nothing;
# the second argument picks another self-test). A sanitizer or emulation
# that misses it would let the real tests pass without proving anything.
set -u
bin=$1
filter=${2:-BlockEmulationSelfTest.*}
out=$("$bin" --gtest_also_run_disabled_tests --gtest_filter="$filter" 2>&1)
if grep -q "WARNING: ThreadSanitizer: data race" <<<"$out"; then
  echo "ThreadSanitizer reported the race of $filter"
  exit 0
fi
echo "no data race reported by $filter:" >&2
tail -20 <<<"$out" >&2
exit 1
