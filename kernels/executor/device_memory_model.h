// The memory ordering the plan interpreter needs, in one place, for the host
// and the device: 8-byte loads and stores with acquire, release or relaxed
// ordering on memory the other end of a FIFO reads, a system-wide fence, a
// pause for wait loops, and the thread group that runs one lane.
//
// Host: GCC's __atomic builtins on plain memory (std::atomic_ref is C++20; the
// FIFOs are plain memory that a GPU or another process may also map).
// Device: cuda::atomic_ref at system scope (the peer may be another GPU or the
// CPU), plus __threadfence_system() where a whole block's writes must be
// visible before one thread publishes them.
#pragma once

#include <cstdint>

#include "reduce/numeric.h"  // BRAID_HD, BRAID_INLINE

#if defined(__CUDACC__)
#include <cuda/atomic>
#endif
#if !defined(__CUDA_ARCH__)
#include <sched.h>
#endif

namespace braid::executor {

#if defined(__CUDA_ARCH__)
using SysRef64 = cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>;
using SysRef32 = cuda::atomic_ref<unsigned int, cuda::thread_scope_system>;
static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "64-bit counters");

__device__ BRAID_INLINE SysRef64 ref64(const uint64_t* p) {
  return SysRef64(*reinterpret_cast<unsigned long long*>(const_cast<uint64_t*>(p)));
}
#endif

BRAID_HD BRAID_INLINE uint64_t loadAcquire(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  return ref64(p).load(cuda::memory_order_acquire);
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

BRAID_HD BRAID_INLINE void storeRelease(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  ref64(p).store(v, cuda::memory_order_release);
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

// One indivisible 8-byte access without ordering: the low-latency protocol's
// line (data and flag travel together, so no fence is needed).
BRAID_HD BRAID_INLINE uint64_t loadRelaxed(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  return ref64(p).load(cuda::memory_order_relaxed);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

BRAID_HD BRAID_INLINE void storeRelaxed(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  ref64(p).store(v, cuda::memory_order_relaxed);
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

// Counts a finished part of a lane on a counter other lanes wait for; the
// release orders the lane's earlier writes (made visible by fenceSystem on
// the device) before the count.
BRAID_HD BRAID_INLINE void addRelease(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  ref64(p).fetch_add(v, cuda::memory_order_release);
#else
  __atomic_fetch_add(p, v, __ATOMIC_RELEASE);
#endif
}

// The abort word: any non-zero value stops every wait.
BRAID_HD BRAID_INLINE uint32_t loadFlag(const uint32_t* p) {
#if defined(__CUDA_ARCH__)
  return SysRef32(*const_cast<unsigned int*>(reinterpret_cast<const unsigned int*>(p)))
      .load(cuda::memory_order_relaxed);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

// Raises a failure word to at least `v` (the worst status of a group's lanes).
BRAID_HD BRAID_INLINE void raiseFlag(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  SysRef32(*reinterpret_cast<unsigned int*>(p)).fetch_max(v, cuda::memory_order_relaxed);
#else
  uint32_t seen = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (seen < v && !__atomic_compare_exchange_n(p, &seen, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
#endif
}

// Makes this thread's earlier writes visible system-wide before a later store
// by any thread of the block that comes after a barrier (fences are cumulative).
BRAID_HD BRAID_INLINE void fenceSystem() {
#if defined(__CUDA_ARCH__)
  __threadfence_system();
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

// Between polls. The host tests run many lanes as threads on few cores, so
// after a short spin a waiting lane hands its core to the one it waits for.
BRAID_HD BRAID_INLINE void pauseAfter(uint64_t polls) {
#if defined(__CUDA_ARCH__)
  if (polls > 64) __nanosleep(100);
#else
  if (polls > 64) {
    sched_yield();
  } else {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause");
#endif
  }
#endif
}

// The threads that run one lane. On the host a lane is one thread; on the
// device it is a block. sync() is a barrier; agree() is a barrier that returns
// the largest of the codes the threads bring, so that every thread takes the
// same branch after a wait (one thread seeing an abort while another saw the
// data must not split the block).
// kDevice: the group is a CUDA block (or the CPU emulation of one, which keeps
// the device's rules, e.g. no wire-type steps).
struct HostGroup {
  static constexpr bool kDevice = false;
  BRAID_HD uint32_t tid() const { return 0; }
  BRAID_HD uint32_t size() const { return 1; }
  BRAID_HD void sync() const {}
  BRAID_HD int32_t agree(int32_t code) const { return code; }
};

#if defined(__CUDACC__)
struct BlockGroup {
  static constexpr bool kDevice = true;
  __device__ uint32_t tid() const { return threadIdx.x; }
  __device__ uint32_t size() const { return blockDim.x; }
  __device__ void sync() const { __syncthreads(); }
  __device__ int32_t agree(int32_t code) const {
    __shared__ int32_t worst;
    if (threadIdx.x == 0) worst = 0;
    __syncthreads();
    if (code != 0) atomicMax(&worst, code);
    __syncthreads();
    const int32_t r = worst;
    __syncthreads();  // before the next agree() resets it
    return r;
  }
};
#endif

}  // namespace braid::executor
