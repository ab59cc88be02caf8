#!/usr/bin/env bash
# Proves braid's nccl.h stands alone: self_contained.c must compile with
# warnings as errors as C99 and as C++17, without CUDA's headers (forced with
# -DBRAID_NO_CUDA_HEADERS, and by simply not having them on the include path)
# and, when CUDA is installed, with them.
# Usage: run_header_checks.sh CC CXX BRAID_INCLUDE CUDA_INCLUDE WORKDIR
set -euo pipefail
CC=$1 CXX=$2 OURS=$3 CUDA=$4 WORK=$5
SRC="$(cd "$(dirname "$0")" && pwd)/self_contained.c"
mkdir -p "$WORK"
failed=0

check() {  # check LABEL COMPILER FLAGS...
  local label=$1; shift
  if "$@" -c "$SRC" -o "$WORK/self_contained.o" 2> "$WORK/errors.txt"; then
    echo "ok   $label"
  else
    echo "FAIL $label: $*"; cat "$WORK/errors.txt"; failed=1
  fi
}

C_FLAGS=(-std=c99 -Wall -Wextra -Werror -pedantic -Wstrict-prototypes -I"$OURS")
CXX_FLAGS=(-x c++ -std=c++17 -Wall -Wextra -Werror -pedantic -I"$OURS")
check "C99, CUDA headers disabled" "$CC" "${C_FLAGS[@]}" -DBRAID_NO_CUDA_HEADERS
check "C99, CUDA headers not on the path" "$CC" "${C_FLAGS[@]}"
check "C++17, CUDA headers disabled" "$CXX" "${CXX_FLAGS[@]}" -DBRAID_NO_CUDA_HEADERS
check "C++17, CUDA headers not on the path" "$CXX" "${CXX_FLAGS[@]}"
check "C11" "$CC" -std=c11 -Wall -Wextra -Werror -pedantic -I"$OURS"
check "C++11" "$CXX" -x c++ -std=c++11 -Wall -Wextra -Werror -pedantic -I"$OURS"

# The forced path must really avoid CUDA even when it is reachable.
# (Preprocess to a file: grep -q closing the pipe early would trip pipefail.)
echo '#include <nccl.h>' | "$CC" -E -x c -DBRAID_NO_CUDA_HEADERS -I"$OURS" -I"$CUDA" - > "$WORK/forced.i"
if grep -q 'cuda_runtime\.h' "$WORK/forced.i"; then
  echo "FAIL -DBRAID_NO_CUDA_HEADERS still pulled in cuda_runtime.h"; failed=1
else
  echo "ok   -DBRAID_NO_CUDA_HEADERS keeps cuda_runtime.h out"
fi

if [[ -f $CUDA/cuda_runtime.h ]]; then
  # CUDA's own headers are not -pedantic clean, so they come in as system headers.
  check "C99 with CUDA headers" "$CC" "${C_FLAGS[@]}" -isystem "$CUDA"
  check "C++17 with CUDA headers" "$CXX" "${CXX_FLAGS[@]}" -isystem "$CUDA"
  echo '#include <nccl.h>' | "$CC" -E -x c -I"$OURS" -isystem "$CUDA" - > "$WORK/with_cuda.i"
  if grep -q 'cuda_runtime\.h' "$WORK/with_cuda.i"; then
    echo "ok   CUDA headers are used when reachable"
  else
    echo "FAIL CUDA headers in $CUDA were not picked up"; failed=1
  fi
else
  echo "note: no CUDA headers in $CUDA; the with-CUDA variants were not compiled"
fi

exit $failed
