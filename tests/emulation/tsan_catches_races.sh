#!/usr/bin/env bash
# The block emulation's self-test: the ThreadSanitizer build must report a
# data race for blocks whose barriers do nothing. A sanitizer or emulation
# that misses it would let the real tests pass without proving anything.
set -u
bin=$1
out=$("$bin" --gtest_also_run_disabled_tests --gtest_filter='BlockEmulationSelfTest.*' 2>&1)
if grep -q "WARNING: ThreadSanitizer: data race" <<<"$out"; then
  echo "ThreadSanitizer reported the race of blocks without barriers"
  exit 0
fi
echo "no data race reported for blocks without barriers:" >&2
tail -20 <<<"$out" >&2
exit 1
