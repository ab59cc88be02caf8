#!/usr/bin/env bash
# Proves libbraid.so can stand in for NVIDIA's libnccl.so.2 at link and load
# time: it must define every nccl*/pnccl* symbol NVIDIA's library defines, and
# export nothing but nccl*/pnccl*/braid* (plus the linker's own section markers).
# Usage: run_symbol_check.sh LIBBRAID NVIDIA_LIBNCCL WORKDIR
# Exits 77 (CTest skip) when NVIDIA's library is absent.
set -euo pipefail
OURS=$1 NVIDIA=$2 WORK=$3
mkdir -p "$WORK"
failed=0

defined() { nm -D --defined-only "$1" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u; }

[[ -f $OURS ]] || { echo "FAIL: $OURS does not exist (did target braid build?)"; exit 1; }
defined "$OURS" > "$WORK/braid_symbols.txt"

# Exports outside the API are ABI we would have to keep, and can clash with the
# program's own symbols.
LINKER_SYMBOLS='^(_init|_fini|_edata|_end|__bss_start)$'
grep -Ev '^(p?nccl|braid)' "$WORK/braid_symbols.txt" | grep -Ev "$LINKER_SYMBOLS" > "$WORK/leaked.txt" || true
if [[ -s $WORK/leaked.txt ]]; then
  echo "FAIL: libbraid.so exports symbols outside nccl*/pnccl*/braid*:"
  sed 's/^/  /' "$WORK/leaked.txt"
  failed=1
fi
grep -qx braidVersionString "$WORK/braid_symbols.txt" ||
  { echo "FAIL: braidVersionString is not exported: is $OURS really braid?"; failed=1; }

if [[ ! -f $NVIDIA ]]; then
  echo "SKIP: NVIDIA's library not found at $NVIDIA (set BRAID_NVIDIA_NCCL_LIBRARY);" \
       "only the export hygiene was checked"
  [[ $failed -eq 0 ]] && exit 77 || exit 1
fi
defined "$NVIDIA" | grep -E '^p?nccl' > "$WORK/nvidia_symbols.txt"
[[ $(wc -l < "$WORK/nvidia_symbols.txt") -gt 60 ]] ||
  { echo "FAIL: only $(wc -l < "$WORK/nvidia_symbols.txt") nccl symbols read from $NVIDIA"; failed=1; }
comm -23 "$WORK/nvidia_symbols.txt" "$WORK/braid_symbols.txt" > "$WORK/missing.txt"
if [[ -s $WORK/missing.txt ]]; then
  echo "FAIL: NVIDIA's library defines these symbols and libbraid.so does not:"
  sed 's/^/  /' "$WORK/missing.txt"
  failed=1
fi

if [[ $failed -ne 0 ]]; then exit 1; fi
echo "PASS: libbraid.so defines all $(wc -l < "$WORK/nvidia_symbols.txt") nccl*/pnccl* symbols of" \
     "$NVIDIA and exports $(wc -l < "$WORK/braid_symbols.txt") symbols, none outside the API"
