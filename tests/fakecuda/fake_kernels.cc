// braid_kernels' entry points (kernels/executor/plan_kernel.h,
// kernels/stream_wait.h, kernels/launch_mark.h) for the fake CUDA runtime: each launch enqueues on
// its stream a task that runs the kernel's code on host threads, with the
// same checks before launching as the real ones. A plan kernel runs every
// lane of the launch at once (all blocks resident, as a cooperative launch
// guarantees), each lane an emulated block (tests/emulation/thread_block.h)
// running the same interpreter code as the CUDA kernel (runMixedLane).
// Both kernels are tracked by the recorder while outstanding, and each
// kernel's first launch without an earlier load (loadStreamWaitKernels,
// loadPlanKernel) counts as a synchronising call: CUDA's lazy loading loads
// the code then, which may wait for the device to be idle.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fakecuda.h"
#include "recorder.h"
#include "kernels/executor/plan_kernel.h"
#include "kernels/executor/typed_step.h"
#include "kernels/launch_error.h"
#include "kernels/launch_mark.h"
#include "kernels/stream_wait.h"
#include "tests/emulation/thread_block.h"

namespace braid {

namespace {

// Host threads per emulated block: 1 keeps CI cheap on few cores; more
// exercises the block's barriers and agree() as the GPU's 256 threads do.
uint32_t emulatedThreads(uint32_t requested) {
  const char* s = std::getenv("BRAID_FAKECUDA_THREADS_PER_LANE");
  const long n = s ? std::strtol(s, nullptr, 10) : 1;
  return uint32_t(std::max(1L, std::min<long>({n, long(requested), 8L})));
}

// Whether a FIFO end's Port and memory are where a GPU can address them
// (device memory, mapped pinned memory): a FIFO in pageable host memory would
// fault on the device.
bool portAddressable(const executor::Port* port) {
  if (!fakecuda::deviceAddressable(port, sizeof(*port))) return false;
  const executor::FifoView& f = port->fifo;
  return fakecuda::deviceAddressable(f.head, 8) && fakecuda::deviceAddressable(f.tail, 8) &&
         (f.sizes == nullptr || fakecuda::deviceAddressable(f.sizes, 8 * size_t(f.nslots))) &&
         fakecuda::deviceAddressable(f.slots, f.slotStride * f.nslots);
}

// A lane whose FIFO the device cannot address: the GPU's illegal-address
// fault, which ends the process's CUDA context; here, the process.
void checkLanePorts(const executor::LaneExec& lane, uint32_t b) {
  for (uint32_t i = 0; i < lane.nsendPorts + lane.nrecvPorts; ++i) {
    const executor::Port* port = i < lane.nsendPorts ? lane.sendPorts[i] : lane.recvPorts[i - lane.nsendPorts];
    if (port == nullptr || portAddressable(port)) continue;
    fprintf(stderr, "fakecuda: plan kernel lane %u: its FIFO %s port %u is not in memory the device can address "
            "(an illegal address on a GPU)\n", b, i < lane.nsendPorts ? "send" : "receive", i);
    std::abort();
  }
}

// Under BRAID_FAKECUDA_SLOW_IMAGE=1 block 0 starts late, so that the other
// blocks reach a carried image's gate (launch_image.h) long before it is
// open: lanes that read the block before the gate opens read another launch's
// image, or none.
bool slowImage() {
  const char* s = std::getenv("BRAID_FAKECUDA_SLOW_IMAGE");
  return s != nullptr && s[0] == '1';
}

// The kernel body: every lane a block of `threads` host threads, all started
// before any is joined (they spin on each other). `image` is the launch's
// parameter, copied when the launch was enqueued.
void runLanes(executor::LaneExec* lanes, uint32_t nlanes, uint32_t threads, int32_t* statuses,
              std::shared_ptr<const executor::LaunchImage> image) {
  const bool slow = image->words != 0 && slowImage();
  std::vector<std::unique_ptr<emulation::BlockShared>> blocks;
  std::vector<std::thread> workers;
  workers.reserve(size_t(nlanes) * threads);
  for (uint32_t b = 0; b < nlanes; ++b) {
    blocks.push_back(std::make_unique<emulation::BlockShared>(threads));
    emulation::BlockShared* block = blocks.back().get();
    for (uint32_t t = 0; t < threads; ++t)
      workers.emplace_back([=] {
        const emulation::ThreadBlockGroup g(block, t);
        if (b == 0 && slow) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        executor::takeLaunchImage(g, b, *image, reinterpret_cast<uint64_t*>(lanes));
        if (t == 0) checkLanePorts(lanes[b], b);
        g.sync();
        const executor::ExecStatus st = executor::runMixedLane(g, lanes[b]);
        if (t == 0 && statuses != nullptr) statuses[b] = int32_t(st);
      });
  }
  for (std::thread& w : workers) w.join();
}

// Whether each kernel's code is loaded (per process: the fake has one device).
std::atomic<bool> streamWaitLoaded{false};
std::atomic<bool> planKernelLoaded{false};
std::atomic<bool> markLaunchLoaded{false};

// A launch of a kernel whose code is not loaded yet loads it first, as CUDA's
// lazy loading does: a synchronising call while another kernel runs.
void loadOnLaunch(std::atomic<bool>* loaded, const char* kernel, const void* caller) {
  if (loaded->exchange(true)) return;
  fakecuda::checkSync((std::string("the first launch of the ") + kernel +
                       ", which loads its code (CUDA's lazy loading: load it before, when a communicator first uses "
                       "the device)").c_str(),
                      caller);
}

// Enqueues a tracked kernel: outstanding from now until its body returns. A
// captured one is a node of the graph: tracked from when a launch of the
// graph runs it.
cudaError_t enqueueKernel(const std::string& what, cudaStream_t stream, std::function<void()> body) {
  fakecuda::checkLaunchStream(stream, what.c_str());
  if (fakecuda::streamCaptures(stream))
    return fakecuda::enqueue(stream, [what, stream, body = std::move(body)] {
      const uint64_t id = fakecuda::trackLaunch(what, stream);
      body();
      fakecuda::finishLaunch(id);
    });
  const uint64_t id = fakecuda::trackLaunch(what, stream);
  const cudaError_t err = fakecuda::enqueue(stream, [id, body = std::move(body)] {
    body();
    fakecuda::finishLaunch(id);
  });
  if (err != cudaSuccess) fakecuda::finishLaunch(id);
  // CUDA_LAUNCH_BLOCKING=1: as CUDA documents, a launch returns only once its
  // kernel (and the stream's work before it) has ended.
  const char* blocking = std::getenv("CUDA_LAUNCH_BLOCKING");
  if (err == cudaSuccess && blocking != nullptr && std::string(blocking) == "1") fakecuda::waitForStream(stream);
  return err;
}

void waitFor(const volatile uint64_t* published, uint64_t target, const volatile uint32_t* abortWord) {
  while (__atomic_load_n(published, __ATOMIC_ACQUIRE) < target && __atomic_load_n(abortWord, __ATOMIC_ACQUIRE) == 0)
    std::this_thread::sleep_for(std::chrono::microseconds(20));
}

Result streamWaitResult(cudaError_t err) {
  // A launch error is the thread's last error, as a real launch leaves it.
  if (err != cudaSuccess) (void)cudaGetLastError();
  return kernels::launchResult("stream-wait kernel", err);
}

}  // namespace
}  // namespace braid

namespace braid::kernels {

Result loadStreamWaitKernels() {
  streamWaitLoaded = true;
  return Result::success();
}

Result launchStreamWait(const volatile uint64_t* published, uint64_t target, const volatile uint32_t* abortWord,
                        cudaStream_t stream) {
  BRAID_TRY(kernels::refuseOnPendingError("stream-wait kernel"));
  loadOnLaunch(&streamWaitLoaded, "stream-wait kernel", __builtin_return_address(0));
  if (!fakecuda::deviceAddressable(const_cast<const uint64_t*>(published), 8) ||
      !fakecuda::deviceAddressable(const_cast<const uint32_t*>(abortWord), 4))
    return kernels::launchResult("stream-wait kernel", cudaErrorInvalidValue);
  return streamWaitResult(enqueueKernel("stream-wait kernel (until " + std::to_string(target) + ")", stream,
                                        [=] { waitFor(published, target, abortWord); }));
}

Result launchStreamWaitIndirect(const volatile uint64_t* published, const volatile uint64_t* target,
                                const volatile uint32_t* abortWord, cudaStream_t stream) {
  BRAID_TRY(kernels::refuseOnPendingError("stream-wait kernel"));
  loadOnLaunch(&streamWaitLoaded, "stream-wait kernel", __builtin_return_address(0));
  return streamWaitResult(enqueueKernel("stream-wait kernel (indirect)", stream, [=] {
    waitFor(published, __atomic_load_n(target, __ATOMIC_ACQUIRE), abortWord);
  }));
}

Result loadMarkLaunchKernel() {
  markLaunchLoaded = true;
  return Result::success();
}

// As the CUDA kernel: the count, a full fence, then the zeroes.
Result launchMarkLaunch(volatile uint64_t* count, volatile uint64_t* beacons, uint32_t words, cudaStream_t stream) {
  BRAID_TRY(kernels::refuseOnPendingError("launch-mark kernel"));
  loadOnLaunch(&markLaunchLoaded, "launch-mark kernel", __builtin_return_address(0));
  if (!fakecuda::deviceAddressable(const_cast<const uint64_t*>(count), 8) ||
      !fakecuda::deviceAddressable(const_cast<const uint64_t*>(beacons), size_t(words) * 8))
    return kernels::launchResult("launch-mark kernel", cudaErrorInvalidValue);
  auto* c = const_cast<uint64_t*>(count);
  auto* b = const_cast<uint64_t*>(beacons);
  const cudaError_t err = enqueueKernel("launch-mark kernel", stream, [c, b, words] {
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (uint32_t i = 0; i < words; ++i) __atomic_store_n(&b[i], uint64_t(0), __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
  });
  if (err != cudaSuccess) (void)cudaGetLastError();  // taken, as the real launch takes it
  return kernels::launchResult("launch-mark kernel", err);
}

}  // namespace braid::kernels

namespace braid::executor {

bool planKernelSupportsType(ncclDataType_t type) { return type >= 0 && type < ncclNumTypes; }

Result loadPlanKernel() {
  planKernelLoaded = true;
  return Result::success();
}

// As the real one asks, through the (fake) runtime.
Result queryPlanDevice(uint32_t threadsPerLane, PlanDevice* out) {
  // The occupancy query reads the kernel's resource use: it loads the code.
  loadOnLaunch(&planKernelLoaded, "plan kernel", __builtin_return_address(0));
  PlanDevice dev;
  int cooperative = 0;
  if (cudaGetDevice(&dev.device) != cudaSuccess ||
      cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, dev.device) != cudaSuccess ||
      cudaDeviceGetAttribute(&dev.major, cudaDevAttrComputeCapabilityMajor, dev.device) != cudaSuccess ||
      cudaDeviceGetAttribute(&dev.minor, cudaDevAttrComputeCapabilityMinor, dev.device) != cudaSuccess)
    return Result(ncclUnhandledCudaError, "plan kernel: querying the current device failed");
  dev.cooperative = cooperative != 0;
  // Any non-null function: the emulated occupancy depends on the block size only.
  static const char kernelTag = 0;
  BRAID_TRY(kernels::residentBlocks(&kernelTag, threadsPerLane, &dev.residentLanes));
  *out = dev;
  return Result::success();
}

Result launchPlanLanes(const PlanDevice& dev, executor::LaneExec* lanes, uint32_t nlanes, uint32_t threadsPerLane,
                       int32_t* statuses, bool anyFp8, cudaStream_t stream, const LaunchImage* image) {
  if (nlanes == 0) return Result::success();
  BRAID_TRY(kernels::checkThreadsPerLane(threadsPerLane));
  BRAID_TRY(kernels::refuseOnPendingError("plan kernel"));
  loadOnLaunch(&planKernelLoaded, "plan kernel", __builtin_return_address(0));
  // A cooperative launch of more blocks than the device holds at once fails
  // (the emulated device's rule, whatever `dev` says).
  (void)dev;
  const uint32_t resident = fakecuda::blocksPerMultiprocessor(threadsPerLane) * fakecuda::kMultiProcessors;
  if (nlanes > resident)
    return Result(ncclUnhandledCudaError, "plan kernel failed to launch: cudaErrorCooperativeLaunchTooLarge (" +
                                              std::to_string(nlanes) + " lanes, " + std::to_string(resident) +
                                              " resident)");
  // The lanes must be device memory the kernel can read (the stream-ordered block).
  if (!fakecuda::deviceAddressable(lanes, sizeof(executor::LaneExec) * nlanes) ||
      (statuses != nullptr && !fakecuda::deviceAddressable(statuses, sizeof(int32_t) * nlanes)))
    return Result(ncclUnhandledCudaError, "plan kernel failed to launch: its lanes or statuses are not device memory");
  // The parameters as the launch copies them: the caller may reuse `image`
  // once this returns.
  auto carried = std::make_shared<executor::LaunchImage>(image != nullptr ? *image : executor::LaunchImage{});
  if (carried->words != 0) {
    // The image is written where the lanes are, and its gate is a device word.
    // Its generation is a parameter, or a device word (a graph's launch count).
    const bool generation = carried->generationAt != nullptr
                                ? fakecuda::deviceAddressable(carried->generationAt, sizeof(uint64_t))
                                : carried->generation != 0;
    if (carried->words > executor::LaunchImage::kMaxWords || !generation ||
        carried->words * sizeof(uint64_t) < sizeof(executor::LaneExec) * nlanes ||
        !fakecuda::deviceAddressable(lanes, carried->words * sizeof(uint64_t)) ||
        !fakecuda::deviceAddressable(carried->gate, sizeof(uint64_t)))
      return Result(ncclUnhandledCudaError, "plan kernel failed to launch: its carried image (" +
                                                std::to_string(carried->words) + " words) or gate is not valid");
    fakecuda::noteLaunchImage(carried->words * sizeof(uint64_t));
  }
  const uint32_t threads = emulatedThreads(threadsPerLane);
  fakecuda::notePlanLaunch(nlanes);
  const std::string what = "plan kernel (" + std::to_string(nlanes) + " lanes" + (anyFp8 ? ", fp8" : "") + ")";
  const cudaError_t err =
      enqueueKernel(what, stream, [=] { runLanes(lanes, nlanes, threads, statuses, carried); });
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return Result(ncclUnhandledCudaError, std::string("plan kernel failed to launch: ") + cudaGetErrorName(err));
  }
  return Result::success();
}

Result launchPlanLanes(ncclDataType_t type, executor::LaneExec* lanes, uint32_t nlanes, uint32_t threadsPerLane,
                       int32_t* statuses, cudaStream_t stream) {
  if (!planKernelSupportsType(type))
    return Result(ncclInvalidArgument, "plan kernel: invalid datatype " + std::to_string(int(type)));
  if (nlanes == 0) return Result::success();
  BRAID_TRY(kernels::checkThreadsPerLane(threadsPerLane));  // before asking the device
  PlanDevice dev;
  BRAID_TRY(queryPlanDevice(threadsPerLane, &dev));
  return launchPlanLanes(dev, lanes, nlanes, threadsPerLane, statuses, type == ncclFloat8e4m3 || type == ncclFloat8e5m2,
                         stream);
}

}  // namespace braid::executor
