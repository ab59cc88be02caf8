#!/bin/sh
# libbraid must not depend on libhwloc at load time (it dlopens it): no NEEDED
# entry for it and no undefined hwloc_* symbol. Exit 77 (skipped) without readelf.
set -u
lib="$1"
command -v readelf > /dev/null 2>&1 || { echo "SKIP: readelf not found"; exit 77; }
dyn=$(readelf -d "$lib") || { echo "FAIL: readelf -d $lib failed"; exit 1; }
# Guard against passing on output we do not understand: libc is always needed.
echo "$dyn" | grep NEEDED | grep -q 'libc\.so' || { echo "FAIL: no NEEDED libc in:"; echo "$dyn"; exit 1; }
if echo "$dyn" | grep NEEDED | grep -i hwloc; then
  echo "FAIL: $lib has a NEEDED entry for libhwloc (it must be loaded with dlopen)"; exit 1
fi
syms=$(readelf --dyn-syms -W "$lib") || { echo "FAIL: readelf --dyn-syms $lib failed"; exit 1; }
if echo "$syms" | grep ' UND ' | grep -E ' hwloc_'; then
  echo "FAIL: $lib refers to hwloc symbols the dynamic linker would have to resolve"; exit 1
fi
echo "$lib has no load-time dependency on libhwloc"
