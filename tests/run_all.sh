#!/usr/bin/env bash
# The test command: installs dependencies, builds braid and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/setup-deps
BUILD=${BRAID_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j "$(nproc)"
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" "$@"
