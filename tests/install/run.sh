#!/bin/sh
# Install braid into a scratch prefix and show that an NCCL program builds and
# runs on it unchanged:
#  1. cmake --install BUILD --prefix TMP
#  2. compile drop_in.c (it includes only nccl.h) against the installed header,
#     and against NVIDIA's header when there is one, linking
#     PREFIX/lib/libnccl.so.2
#  3. check with ldd that libnccl.so.2 resolves into the prefix, not to
#     NVIDIA's NCCL (which sits in the loader cache)
#  4. run each build with 2, 3, 4 and 8 processes over shared memory and over
#     TCP (NCCL_SHM_DISABLE=1), checking from /proc/self/maps that the
#     library loaded is the installed one
#  5. when NVIDIA's libnccl is present: a program linked against it runs on
#     braid through LD_LIBRARY_PATH
#
# usage: run.sh BRAID_LIB_DIR BUILD_DIR [CMAKE] [CC]
set -eu

braid_lib_dir=$1
build_dir=$2
cmake=${3:-cmake}
cc=${4:-cc}
here=$(cd "$(dirname "$0")" && pwd)
nvidia_inc=/usr/local/cuda/include
nvidia_lib=/usr/local/cuda/lib64

fail() {
  echo "install_drop_in: FAILED: $*" >&2
  exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/braid-install.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
prefix=$(cd "$work" && pwd -P)/prefix

[ -e "$braid_lib_dir/libbraid.so" ] || [ -e "$braid_lib_dir/libbraid.so.0" ] ||
  fail "no libbraid in $braid_lib_dir: build the braid target first"

echo "== cmake --install $build_dir --prefix $prefix"
"$cmake" --install "$build_dir" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install failed"; }

[ -f "$prefix/include/nccl.h" ] || fail "the install has no include/nccl.h"
lib=$(find "$prefix" -name libnccl.so.2 | head -n 1)
[ -n "$lib" ] || fail "the install has no libnccl.so.2"
libdir=$(dirname "$lib")
[ -e "$libdir/libnccl.so" ] || fail "the install has no libnccl.so (for -lnccl)"
echo "   installed: $(ls "$libdir" | tr '\n' ' ')"

# Builds drop_in.c against one header; the binary links libnccl.so.2 of the prefix.
build() {
  name=$1
  shift
  echo "== build $name: $cc -std=c99 $* drop_in.c $lib"
  "$cc" -std=c99 -Wall -Wextra "$@" "$here/drop_in.c" "$lib" -Wl,-rpath,"$libdir" \
    -o "$work/$name" || fail "$name does not compile"
  check_ldd "$name"
}

# The NCCL library a binary needs (libnccl.so.2, or libbraid.so.0 when it was
# linked against braid's file, whose soname that is) must resolve into the prefix.
check_ldd() {
  found=0
  for resolved in $(ldd "$work/$1" | awk '$1 ~ /^lib(nccl|braid)\.so/ { print $1 "=>" $3 }'); do
    found=1
    case "${resolved#*=>}" in
      "$libdir"/*) echo "   ldd: $resolved" ;;
      *) ldd "$work/$1" >&2; fail "$1 resolves ${resolved%%=>*} to '${resolved#*=>}', not into $libdir" ;;
    esac
  done
  [ "$found" = 1 ] || { ldd "$work/$1" >&2; fail "$1 needs no NCCL library?"; }
}

# Runs one binary on every rank count and transport; env: extra assignments.
run_all() {
  exe=$1
  shift
  for transport in shm tcp; do
    shm_disable=0
    [ "$transport" = tcp ] && shm_disable=1
    for n in 2 3 4 8; do
      out="$work/out.txt"
      if ! env "$@" NCCL_SHM_DISABLE=$shm_disable "$work/$exe" "$n" >"$out" 2>&1; then
        cat "$out" >&2
        fail "$exe with $n ranks over $transport"
      fi
      grep -q '^loaded: ' "$out" || { cat "$out" >&2; fail "$exe printed no loaded NCCL library"; }
      if grep '^loaded: ' "$out" | grep -v "^loaded: $prefix/" >/dev/null; then
        cat "$out" >&2
        fail "$exe loaded an NCCL library from outside $prefix"
      fi
      echo "   $exe: $n ranks over $transport ok ($(grep '^loaded: ' "$out" | head -n 1))"
    done
  done
}

build drop_in_braid_header -Werror -I"$prefix/include"
run_all drop_in_braid_header

if [ -f "$nvidia_inc/nccl.h" ]; then
  build drop_in_nvidia_header -I"$nvidia_inc"
  run_all drop_in_nvidia_header
else
  echo "== no NVIDIA nccl.h in $nvidia_inc: skipping the build against it"
fi

if [ -f "$nvidia_inc/nccl.h" ] && [ -e "$nvidia_lib/libnccl.so" ]; then
  echo "== build against NVIDIA's NCCL, run on braid through LD_LIBRARY_PATH"
  "$cc" -std=c99 -I"$nvidia_inc" "$here/drop_in.c" -L"$nvidia_lib" -lnccl -o "$work/drop_in_nvidia_linked" ||
    fail "drop_in.c does not link against NVIDIA's libnccl"
  LD_LIBRARY_PATH="$libdir" check_ldd drop_in_nvidia_linked
  run_all drop_in_nvidia_linked LD_LIBRARY_PATH="$libdir"
fi

echo "install_drop_in: all good"
