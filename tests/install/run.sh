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
#  6. the packages: drop_in.c built with `pkg-config --cflags --libs nccl`,
#     and the C++ training example (examples/cpp_mlp) configured with
#     find_package(braid CONFIG) against the prefix, run by the installed
#     braidrun on 2 and 3 ranks over shared memory and TCP: it must train
#     and end with the same weights on every rank
#  7. PyTorch's discovery of a system NCCL (nccl_discovery/) finds the prefix
#     by NCCL_ROOT, and by NCCL_INCLUDE_DIR and NCCL_LIB_DIR
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

echo "== pkg-config: drop_in.c with \$(pkg-config --cflags --libs nccl)"
if command -v pkg-config >/dev/null 2>&1; then
  flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs nccl) || fail "pkg-config finds no nccl.pc"
  # shellcheck disable=SC2086
  "$cc" -std=c99 -Wall "$here/drop_in.c" $flags -o "$work/drop_in_pkgconfig" || fail "drop_in.c does not build with pkg-config"
  check_ldd drop_in_pkgconfig
  run_all drop_in_pkgconfig
else
  echo "   no pkg-config: skipped"
fi

# PyTorch's own discovery of a system NCCL (USE_SYSTEM_NCCL=1), restated in
# nccl_discovery/: by NCCL_ROOT alone, and by NCCL_INCLUDE_DIR and
# NCCL_LIB_DIR, it must find the prefix's header and library, not NVIDIA's.
discover() {  # name, env assignments...
  name=$1
  shift
  if ! env -u NCCL_ROOT -u NCCL_INCLUDE_DIR -u NCCL_LIB_DIR "$@" "$cmake" -S "$here/nccl_discovery" \
      -B "$work/discovery_$name" >"$work/discovery.log" 2>&1; then
    cat "$work/discovery.log" >&2
    fail "PyTorch's NCCL discovery ($name) fails on the prefix"
  fi
  for found in "found nccl.h in $prefix/" "found the library $prefix/" "library and header agree"; do
    grep -q -- "$found" "$work/discovery.log" || { cat "$work/discovery.log" >&2; fail "discovery ($name): no '$found'"; }
  done
  echo "   $name: $(grep -o 'header version [0-9.]*' "$work/discovery.log"), $(grep -o 'found the library .*' "$work/discovery.log")"
}
echo "== PyTorch's NCCL discovery (USE_SYSTEM_NCCL) against the prefix"
discover nccl_root NCCL_ROOT="$prefix"
discover include_and_lib_dir NCCL_INCLUDE_DIR="$prefix/include" NCCL_LIB_DIR="$libdir"

echo "== find_package(braid CONFIG): examples/cpp_mlp built against the prefix"
examples=$(cd "$here/../../examples" && pwd)
"$cmake" -S "$examples/cpp_mlp" -B "$work/mlp" -DCMAKE_PREFIX_PATH="$prefix" >"$work/mlp.log" 2>&1 &&
  "$cmake" --build "$work/mlp" >>"$work/mlp.log" 2>&1 || { cat "$work/mlp.log" >&2; fail "the example does not build"; }
check_ldd mlp/mlp_train
[ -x "$prefix/bin/braidrun" ] || fail "the install has no bin/braidrun"
for transport in shm tcp; do
  shm_disable=0
  [ "$transport" = tcp ] && shm_disable=1
  for n in 2 3; do
    out="$work/mlp.txt"
    NCCL_SHM_DISABLE=$shm_disable "$prefix/bin/braidrun" -n "$n" "$work/mlp/mlp_train" 8 >"$out" 2>&1 ||
      { cat "$out" >&2; fail "mlp_train with $n ranks over $transport"; }
    grep -q "^same weights on every one of $n ranks" "$out" || { cat "$out" >&2; fail "mlp_train: no agreement line"; }
    first=$(awk '/^epoch +1 /{print $4}' "$out")
    last=$(awk '/^epoch +8 /{print $4}' "$out")
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 2) }' ||
      { cat "$out" >&2; fail "mlp_train did not learn (loss $first -> $last)"; }
    echo "   mlp_train: $n ranks over $transport: loss $first -> $last, same weights"
  done
done

echo "install_drop_in: all good"
