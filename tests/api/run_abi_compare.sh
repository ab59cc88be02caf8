#!/usr/bin/env bash
# Proves braid's include/nccl.h is ABI-identical to NVIDIA's nccl.h:
#  1. abi_dump.c (layouts, enum values, initializers, macros) built against each
#     header; outputs must be equal except the "version" lines, which must say
#     2.27.7 / 22707 for braid.
#  2. Both headers must declare the same set of nccl*/pnccl* functions, and
#     abi_sigs.cc must report identical function types for each.
# Usage: run_abi_compare.sh CC CXX BRAID_INCLUDE NVIDIA_INCLUDE WORKDIR
# Exits 77 (CTest skip) when NVIDIA's header is absent.
set -euo pipefail
CC=$1 CXX=$2 OURS=$3 NVIDIA=$4 WORK=$5
HERE=$(cd "$(dirname "$0")" && pwd)

if [[ ! -f $NVIDIA/nccl.h ]]; then
  echo "SKIP: NVIDIA's nccl.h not found in $NVIDIA; nothing to compare against" \
       "(set BRAID_NVIDIA_NCCL_INCLUDE_DIR)"
  exit 77
fi
mkdir -p "$WORK"
failed=0

# --- 1. data layout, enums, macros, initializers ---------------------------------
# NVIDIA's header needs CUDA's; braid's is dumped both without and with them.
"$CC" -std=c11 -Wall -Wno-deprecated-declarations -I"$NVIDIA" "$HERE/abi_dump.c" -o "$WORK/dump_nvidia"
"$CC" -std=c11 -Wall -Werror -I"$OURS" -DBRAID_NO_CUDA_HEADERS "$HERE/abi_dump.c" -o "$WORK/dump_braid"
"$CC" -std=c11 -Wall -I"$OURS" -I"$NVIDIA" "$HERE/abi_dump.c" -o "$WORK/dump_braid_cuda"
"$WORK/dump_nvidia" > "$WORK/nvidia.txt"
"$WORK/dump_braid" > "$WORK/braid.txt"
"$WORK/dump_braid_cuda" > "$WORK/braid_cuda.txt"

for ours in braid braid_cuda; do
  if ! diff -u <(grep -v '^version ' "$WORK/nvidia.txt") <(grep -v '^version ' "$WORK/$ours.txt"); then
    echo "FAIL: layout/enum/macro dump differs between NVIDIA's header and braid's ($ours)"
    failed=1
  fi
done
[[ $(grep -vc '^version ' "$WORK/nvidia.txt") -gt 80 ]] || { echo "FAIL: dump suspiciously short"; failed=1; }

expected_version='version config.version=22707
version siminfo.version=22707
version NCCL_MAJOR=2
version NCCL_MINOR=27
version NCCL_PATCH=7
version NCCL_SUFFIX=""
version NCCL_VERSION_CODE=22707
version code_matches_parts=1'
for ours in braid braid_cuda; do
  if ! diff -u <(echo "$expected_version") <(grep '^version ' "$WORK/$ours.txt"); then
    echo "FAIL: braid's header must claim NCCL 2.27.7 ($ours)"
    failed=1
  fi
done
grep -q '^version code_matches_parts=1' "$WORK/nvidia.txt" ||
  { echo "FAIL: NVIDIA's version code does not match NCCL_VERSION(); dump is broken"; failed=1; }

# --- 2. function set and signatures -------------------------------------------------
list_functions() {  # declarations start a line with their return type
  grep -oE '^[[:space:]]*(ncclResult_t|const char[[:space:]]*\*|void)[[:space:]]+p?nccl[A-Za-z0-9_]+[[:space:]]*\(' "$1" |
    sed -E 's/[[:space:]]*\($//; s/.*[[:space:]*]//' | sort -u
}
list_functions "$NVIDIA/nccl.h" > "$WORK/functions_nvidia.txt"
list_functions "$OURS/nccl.h" > "$WORK/functions_braid.txt"
if ! diff -u "$WORK/functions_nvidia.txt" "$WORK/functions_braid.txt"; then
  echo "FAIL: the headers declare different function sets (- NVIDIA only, + braid only)"
  failed=1
fi
[[ $(wc -l < "$WORK/functions_nvidia.txt") -gt 60 ]] || { echo "FAIL: too few functions found"; failed=1; }
sed 's/.*/ABI_FUNCTION(&)/' "$WORK/functions_nvidia.txt" > "$WORK/abi_functions.inc"

"$CXX" -std=c++17 -Wno-deprecated-declarations -I"$WORK" -I"$NVIDIA" "$HERE/abi_sigs.cc" -o "$WORK/sigs_nvidia"
"$CXX" -std=c++17 -Wno-deprecated-declarations -I"$WORK" -I"$OURS" -DBRAID_NO_CUDA_HEADERS "$HERE/abi_sigs.cc" -o "$WORK/sigs_braid"
"$CXX" -std=c++17 -Wno-deprecated-declarations -I"$WORK" -I"$OURS" -I"$NVIDIA" "$HERE/abi_sigs.cc" -o "$WORK/sigs_braid_cuda"
"$WORK/sigs_nvidia" > "$WORK/sigs_nvidia.txt"
for ours in braid braid_cuda; do
  "$WORK/sigs_$ours" > "$WORK/sigs_$ours.txt"
  if ! diff -u "$WORK/sigs_nvidia.txt" "$WORK/sigs_$ours.txt"; then
    echo "FAIL: function signatures differ between NVIDIA's header and braid's ($ours)"
    failed=1
  fi
done

if [[ $failed -ne 0 ]]; then exit 1; fi
echo "PASS: $(grep -vc '^version ' "$WORK/nvidia.txt") layout facts and" \
     "$(wc -l < "$WORK/sigs_nvidia.txt") function signatures match NVIDIA's header; braid claims 2.27.7"
