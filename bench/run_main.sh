#!/usr/bin/env bash
# The main job: installs dependencies, builds braid and runs the bundled
# all_reduce_perf across several local ranks (on the GPU(s) when present, on
# host memory without one).
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/setup-deps
BUILD=${BRAID_BUILD_DIR:-build}
NRANKS=${NRANKS:-4}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j "$(nproc)"
exec "$BUILD/bench/braidrun" -n "$NRANKS" "$BUILD/bench/all_reduce_perf" -b 8 -e 64M -f 2 -c 1 "$@"
