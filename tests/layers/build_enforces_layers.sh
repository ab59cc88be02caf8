#!/usr/bin/env bash
# The build refuses an include that points up: a source compiled with the
# transports layer's include path cannot include the engine's comm.h, while
# the same path finds the headers of the transports and of the base below.
#   build_enforces_layers.sh <build dir>
set -u
build=$1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! cmake --build "$build" --target braid_layers_downward >"$log" 2>&1; then
  cat "$log"
  echo "FAIL: a downward include did not build"
  exit 1
fi
if cmake --build "$build" --target braid_layers_upward >"$log" 2>&1; then
  echo "FAIL: the transports layer could include engine/comm.h"
  exit 1
fi
if ! grep -q 'engine/comm.h' "$log"; then
  cat "$log"
  echo "FAIL: the upward include failed, but not for want of engine/comm.h"
  exit 1
fi
echo "ok: the transports layer cannot include engine/comm.h, and can include base/ and transports/"
