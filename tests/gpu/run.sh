#!/usr/bin/env bash
# Builds braid with CUDA and runs the GPU tests (CTest label "gpu") on a machine
# with a GPU, nvcc, CMake and ninja:
#
#   tests/gpu/run.sh [build-dir]          (default: <repo>/build-gpu)
#
# GoogleTest, first found of: GTEST_ROOT (an install prefix); GTEST_SRC (its
# sources, built into the build dir); a system install (libgtest-dev); sources
# in /usr/src/googletest or <repo>/shared/googletest, built likewise.
# BRAID_CUDA_ARCHS (e.g. "80;90") overrides the SM versions built.
# A missing GPU fails the tests here rather than skipping them (BRAID_REQUIRE_GPU,
# default 1; set it to 0 to allow skips, e.g. to try the script without a GPU).
# Then the GPU tests again under CUDA_LAUNCH_BLOCKING=1 (BRAID_GPU_BLOCKING=0
# skips), the plan kernel and device FIFO tests under compute-sanitizer's
# memcheck and racecheck where the toolkit has it (BRAID_GPU_SANITIZER=0
# skips), and every perf tool on device memory, checked, with both device
# engines, ranks as threads of one process and as processes sharing the GPU
# (BRAID_GPU_PERF_CHECK=0 skips), and the figures of bench/reduce_copy_bench
# and bench/launch_latency.
#
# A lent GPU comes with minutes of device time, so the build can be made on
# a CPU machine with nvcc and carried:
#   BRAID_GPU_PACK=<archive> tests/gpu/run.sh [build-dir]
#       builds (Release, BRAID_CUDA_ARCHS default 90), lists the GPU tests and
#       writes their binaries, the perf tools, the library and the CTest files
#       to <archive> (about 26 MB); runs nothing. The build dir must lie in
#       the checkout. BRAID_GPU_TEST_TIMEOUT=<s> lowers each GPU test's CTest
#       timeout in it (a hang then costs seconds, not a quarter hour).
#   BRAID_GPU_PREBUILT=<archive> tests/gpu/run.sh   (on the GPU machine)
#       unpacks it where it was built, linking this checkout there when it
#       lies elsewhere, and runs everything below without building.
# The machine running it needs the driver and CTest; no compiler, no GoogleTest.
# Each step can be skipped, to split a run over two calls of a lent GPU:
# BRAID_GPU_CTEST=0 (the GPU tests), BRAID_GPU_BLOCKING=0, BRAID_GPU_SANITIZER=0,
# BRAID_GPU_PERF_CHECK=0 (the perf tools, figures and nccl-tests).
# BRAID_NCCL_TESTS=<dir> (with BRAID_GPU_PACK, or when building here): NVIDIA's
# nccl-tests binaries, built beside the project from its public source (never
# committed; `make -C src NVCC_GENCODE=...`), copied into <build>/nccl-tests and
# packed; they then run against braid (checked, #wrong 0) and, where the machine
# has NVIDIA's NCCL (PyTorch's nvidia.nccl wheel), against it for the ratio.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$repo/build-gpu}
jobs=$(nproc)
tools=(all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf reduce_perf alltoall_perf
       sendrecv_perf gather_perf scatter_perf)

# BRAID_GPU_PREBUILT: the archive names the checkout and build dir it came from.
if [ -n "${BRAID_GPU_PREBUILT:-}" ]; then
  archive=$(cd "$(dirname "$BRAID_GPU_PREBUILT")" && pwd)/$(basename "$BRAID_GPU_PREBUILT")
  read -r packed_repo packed_build < <(tar -xzOf "$archive" PACKED_AT 2>/dev/null) || true
  if [ -z "${packed_repo:-}" ] || [ -z "${packed_build:-}" ]; then
    echo "run.sh: $archive is not an archive of BRAID_GPU_PACK (no PACKED_AT in it)" >&2
    exit 2
  fi
  if [ "$packed_repo" != "$repo" ]; then
    if [ ! -e "$packed_repo" ]; then
      mkdir -p "$(dirname "$packed_repo")"
      ln -s "$repo" "$packed_repo"
    elif [ "$(cd "$packed_repo" && pwd -P)" != "$(cd "$repo" && pwd -P)" ]; then
      echo "run.sh: $archive was built in $packed_repo, which is another checkout here" >&2
      exit 2
    fi
  fi
  tar -xzf "$archive" -C "$packed_repo" --exclude PACKED_AT
  build=$packed_repo/$packed_build
  echo "run.sh: the build packed in $archive, at $build"
fi
mkdir -p "$build"

build_here() {
  have_system_gtest() {
    compgen -G "/usr/lib/*/cmake/GTest/GTestConfig.cmake" >/dev/null ||
      compgen -G "/usr/lib*/cmake/GTest/GTestConfig.cmake" >/dev/null ||
      [ -f /usr/local/lib/cmake/GTest/GTestConfig.cmake ]
  }

  gtest_args=()
  if [ -n "${GTEST_ROOT:-}" ]; then
    gtest_args=(-DGTEST_ROOT="$GTEST_ROOT" -DGTest_ROOT="$GTEST_ROOT")
  elif [ -n "${GTEST_SRC:-}" ] || ! have_system_gtest; then
    src=""
    for d in "${GTEST_SRC:-}" /usr/src/googletest "$repo/shared/googletest"; do
      if [ -n "$d" ] && [ -f "$d/CMakeLists.txt" ]; then src=$d; break; fi
    done
    if [ -z "$src" ]; then
      echo "run.sh: no GoogleTest: install libgtest-dev, or set GTEST_ROOT or GTEST_SRC" >&2
      exit 2
    fi
    prefix=$build/googletest
    if [ ! -f "$prefix/.installed" ]; then
      echo "run.sh: building GoogleTest from $src"
      cmake -S "$src" -B "$build/googletest-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_GMOCK=OFF -DINSTALL_GTEST=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
        -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
      cmake --build "$build/googletest-build" -j "$jobs" >/dev/null
      cmake --install "$build/googletest-build" >/dev/null
      touch "$prefix/.installed"
    fi
    gtest_args=(-DGTEST_ROOT="$prefix" -DGTest_ROOT="$prefix")
  fi

  arch_args=()
  if [ -n "${BRAID_CUDA_ARCHS:-}" ]; then arch_args=(-DBRAID_CUDA_ARCHS="$BRAID_CUDA_ARCHS"); fi
  if [ -n "${BRAID_GPU_PACK:-}" ]; then
    [ -n "${BRAID_CUDA_ARCHS:-}" ] || arch_args=(-DBRAID_CUDA_ARCHS=90)
    arch_args+=(-DCMAKE_BUILD_TYPE=Release)
  fi

  cmake -S "$repo" -B "$build" -G Ninja -DBRAID_CUDA=ON -DBRAID_BUILD_BENCH=ON \
    ${gtest_args[@]+"${gtest_args[@]}"} ${arch_args[@]+"${arch_args[@]}"}
  cmake --build "$build" -j "$jobs" --target braid_gpu_tests braidrun reduce_copy_bench launch_latency "${tools[@]}"
}

# BRAID_NCCL_TESTS: the nccl-tests binaries a run uses, beside the build's tools.
nccl_tests=(all_reduce_perf all_gather_perf sendrecv_perf)
copy_nccl_tests() {
  [ -n "${BRAID_NCCL_TESTS:-}" ] || return 0
  mkdir -p "$build/nccl-tests"
  for t in "${nccl_tests[@]}"; do cp "$BRAID_NCCL_TESTS/$t" "$build/nccl-tests/"; done
}

# BRAID_GPU_PACK: the files a run needs, relative to the checkout.
pack() {
  case "$build" in "$repo"/*) ;; *) echo "run.sh: to pack, the build dir must lie in $repo" >&2; exit 2 ;; esac
  local rel=${build#"$repo"/}
  (cd "$build" && ctest -N -L gpu >/dev/null)  # lists each test program's tests (gtest discovery)
  if [ -n "${BRAID_GPU_TEST_TIMEOUT:-}" ]; then
    sed -i -E "s/TIMEOUT ([0-9]+)/TIMEOUT $BRAID_GPU_TEST_TIMEOUT/g" "$build"/tests/gpu/*_tests.cmake
    sed -i -E "s/TIMEOUT \"([0-9]+)\"/TIMEOUT \"$BRAID_GPU_TEST_TIMEOUT\"/g" "$build"/tests/gpu/CTestTestfile.cmake
  fi
  local list meta
  list=$(mktemp) meta=$(mktemp -d)
  (cd "$repo" && find "$rel" \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' \) \
     -print && ls -d "$rel"/tests/gpu/gpu_*_test "$rel"/bench/braidrun "$rel"/bench/reduce_copy_bench "$rel"/bench/launch_latency "$rel"/libbraid.so* "$rel"/libnccl.so* &&
     for t in "${tools[@]}"; do echo "$rel/bench/$t"; done &&
     if [ -d "$rel/nccl-tests" ]; then echo "$rel/nccl-tests"; fi) >"$list"
  echo "$repo $rel" >"$meta/PACKED_AT"
  tar -czf "$BRAID_GPU_PACK" -C "$repo" -T "$list" -C "$meta" PACKED_AT
  rm -rf "$list" "$meta"
  echo "run.sh: packed $(wc -c <"$BRAID_GPU_PACK") bytes into $BRAID_GPU_PACK; on the GPU machine:" \
       "BRAID_GPU_PREBUILT=<it> tests/gpu/run.sh"
}

if [ -z "${BRAID_GPU_PREBUILT:-}" ]; then build_here; copy_nccl_tests; fi
if [ -n "${BRAID_GPU_PACK:-}" ]; then pack; exit 0; fi
export BRAID_REQUIRE_GPU=${BRAID_REQUIRE_GPU:-1}
cd "$build"
status=0
# BRAID_GPU_CTEST=0 skips the GPU tests and their graph rerun (a second call
# on a lent GPU that runs the later steps only).
if [ "${BRAID_GPU_CTEST:-1}" != 0 ]; then
  ctest -L gpu --output-on-failure || status=1

  # CUDA graphs with captured plan kernels (BRAID_GRAPH_ENGINE=kernels, not
  # yet the default): the graph tests again, a group one capture takes whole
  # (one graph for all ranks) now captured as plan kernels.
  echo "run.sh: the graph tests again with BRAID_GRAPH_ENGINE=kernels"
  BRAID_DEVICE_ENGINE=kernels BRAID_GRAPH_ENGINE=kernels timeout 600 tests/gpu/gpu_device_collectives_test \
    --gtest_filter='Ranks/DeviceGraphs.*:DevicePath.*Graph*:DevicePath.*OfALaunch*:DevicePath.*Capture*' ||
    { echo "run.sh: FAILED with BRAID_GRAPH_ENGINE=kernels"; status=1; }
fi

# Again with every launch synchronous: a kernel that only works because it
# overlaps with another (a lane spinning on a lane of a later launch) hangs
# or fails here (ctest's per-test timeouts bound it). Left out: the tests
# whose application must run while a launch is outstanding (a gate kernel the
# host opens after braid's calls return; an abort of a rank whose stream
# waits; CUDA graphs of several ranks launched one after another from one
# thread, each waiting for the next), which no library can pass when launches
# block (NCCL neither: one thread driving several ranks' launches). The device
# matrix runs on both engines. BRAID_GPU_BLOCKING=0 skips.
if [ "${BRAID_GPU_BLOCKING:-1}" != 0 ]; then
  echo "run.sh: the GPU tests again under CUDA_LAUNCH_BLOCKING=1"
  CUDA_LAUNCH_BLOCKING=1 ctest -L gpu -E "CallsReturnAtOnce|AbortReleases|Graph|OfALaunch|gpu_device_lanes_threads" --output-on-failure ||
    { echo "run.sh: FAILED under CUDA_LAUNCH_BLOCKING=1"; status=1; }
  CUDA_LAUNCH_BLOCKING=1 BRAID_DEVICE_ENGINE=kernels timeout 900 tests/gpu/gpu_device_collectives_test \
    --gtest_filter='Ranks/DeviceCollectives.*' ||
    { echo "run.sh: FAILED under CUDA_LAUNCH_BLOCKING=1 with BRAID_DEVICE_ENGINE=kernels"; status=1; }
fi

# The plan kernel and the device FIFOs under compute-sanitizer (memcheck,
# then racecheck), where the toolkit has it. BRAID_GPU_SANITIZER=0 skips.
sanitizer=$(command -v compute-sanitizer || true)
[ -z "$sanitizer" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && sanitizer=/usr/local/cuda/bin/compute-sanitizer
if [ "${BRAID_GPU_SANITIZER:-1}" != 0 ] && [ -n "$sanitizer" ]; then
  for tool in memcheck racecheck; do
    for exe in tests/gpu/gpu_plan_kernel_test tests/gpu/gpu_p2p_fifo_memory_test; do
      [ -x "$exe" ] || continue
      if "$sanitizer" --tool "$tool" --error-exitcode 1 "$exe" >"sanitizer-$tool-$(basename "$exe").log" 2>&1; then
        echo "run.sh: ok: $(basename "$exe") under compute-sanitizer --tool $tool"
      else
        echo "run.sh: FAILED: $(basename "$exe") under compute-sanitizer --tool $tool (see $build/sanitizer-$tool-$(basename "$exe").log)"
        tail -20 "sanitizer-$tool-$(basename "$exe").log"
        status=1
      fi
    done
  done
elif [ "${BRAID_GPU_SANITIZER:-1}" != 0 ]; then
  echo "run.sh: no compute-sanitizer in this toolkit: skipped"
fi

# Every perf tool on device memory, checked (#wrong must be 0), 2 and 4 ranks
# as processes sharing the GPU(s) (braidrun starts one process per rank), and 4
# ranks as threads of one process (-t 4: where the plan kernels run, as
# processes on one GPU are staged), and 4 ranks driven by one thread (-g 4:
# one launch, the ranks reading each other's buffers in place, PeerAccess),
# with the staged path and with the plan kernels. Set BRAID_GPU_PERF_CHECK=0
# to skip.
perf_check() {  # log file, what is checked, the command
  local log=$1 what=$2
  shift 2
  if "$@" >"$log" 2>&1; then
    echo "run.sh: ok: $what"
  else
    echo "run.sh: FAILED: $what (see $build/$log)"
    tail -20 "$log"
    status=1
  fi
}
if [ "${BRAID_GPU_PERF_CHECK:-1}" != 0 ]; then
  sweep=(-b 8 -e 8M -f 8 -n 5 -w 2 -c 1 --memory device)
  for engine in staged kernels; do
    export BRAID_DEVICE_ENGINE=$engine BRAID_PROGRESS=0
    for tool in "${tools[@]}"; do
      perf_check "perf-$tool-$engine-t4.log" "$tool, -t 4, BRAID_DEVICE_ENGINE=$engine" \
        timeout 120 "./bench/$tool" -t 4 "${sweep[@]}"
      perf_check "perf-$tool-$engine-g4.log" "$tool, -g 4, BRAID_DEVICE_ENGINE=$engine" \
        timeout 120 "./bench/$tool" -g 4 "${sweep[@]}"
      for n in 2 4; do
        perf_check "perf-$tool-$engine-$n.log" "$tool, $n ranks, BRAID_DEVICE_ENGINE=$engine" \
          ./bench/braidrun -n "$n" "./bench/$tool" "${sweep[@]}"
      done
    done
  done
  unset BRAID_DEVICE_ENGINE
  # The plan kernel's copy and reduce loops against cudaMemcpy on the same
  # buffers (issue 17: the reduce loop at >= 85% of the copy's bandwidth);
  # a figure for docs/performance.md, failing only when the result is wrong.
  perf_check reduce-copy.log "reduce_copy_bench 1G (its table in $build/reduce-copy.log)" \
    timeout 120 ./bench/reduce_copy_bench 1G 20
  cat reduce-copy.log
  # Where an 8 B allreduce's time goes (issue 17: 10 us a call): the host's
  # enqueue, back to back, one at a time, against empty kernels.
  perf_check launch-latency.log "launch_latency (its table in $build/launch-latency.log)" \
    timeout 120 ./bench/launch_latency 500
  cat launch-latency.log
  BRAID_GRAPH_ENGINE=kernels perf_check launch-latency-graph-kernels.log \
    "launch_latency, BRAID_GRAPH_ENGINE=kernels (its table in $build/launch-latency-graph-kernels.log)" \
    timeout 120 ./bench/launch_latency 500
  cat launch-latency-graph-kernels.log
  # Issue 17's figures: 8 B per call (10 us the bar) and 4 ranks' 1 GiB against
  # the direct-reduction roofline (8 GiB of traffic at reduce-copy.log's copy
  # bandwidth), one thread driving the four ranks (PeerAccess).
  perf_check figure-g4-8B.log "all_reduce_perf -g 4, 8 B" \
    timeout 60 ./bench/all_reduce_perf -g 4 -b 8 -e 8 -n 500 -w 50 -c 0 --memory device
  perf_check figure-g4-1G.log "all_reduce_perf -g 4, 1 MiB to 1 GiB" \
    timeout 90 ./bench/all_reduce_perf -g 4 -b 1M -e 1G -f 32 -n 5 -w 2 -c 0 --memory device
  cat figure-g4-8B.log figure-g4-1G.log
  # NVIDIA's nccl-tests against braid, then against NVIDIA's NCCL where there
  # is one (one rank, one GPU: NCCL refuses several ranks on one GPU).
  if [ -x nccl-tests/all_reduce_perf ]; then
    nvidia_nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
    nccl_tests_on() {  # tool, which library, its directory
      perf_check "nccl-tests-$1-$2.log" "nccl-tests $1 against $2 ($3)" \
        env LD_LIBRARY_PATH="$3${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 120 "nccl-tests/$1" -b 8 -e 1G -f 8 -g 1 -c 1 -n 5 -w 2
      grep -E "^ +[0-9]+ |bus bandwidth|wrong" "nccl-tests-$1-$2.log" || true
    }
    for t in "${nccl_tests[@]}"; do
      [ -x "nccl-tests/$t" ] || continue
      nccl_tests_on "$t" braid "$build"
      if [ -n "$nvidia_nccl" ] && [ -e "$nvidia_nccl/libnccl.so.2" ]; then nccl_tests_on "$t" nccl "$nvidia_nccl"; fi
    done
  fi
fi
exit $status
