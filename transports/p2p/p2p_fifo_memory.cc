// The CUDA FIFO provider: device memory on one GPU, shared by pointer within
// the process and by CUDA IPC handle across processes of the host.
#include "transports/p2p/p2p_fifo_memory.h"

#include <unistd.h>

#include <random>
#include <vector>

#include "base/blob.h"
#include "base/cuda_quiet_free.h"
#include "base/cuda_util.h"

namespace braid::p2p {
namespace {

constexpr uint32_t kBlobMagic = 0x46434442;  // "BDCF" little-endian
constexpr uint32_t kBlobVersion = 1;

std::string deviceContext(const char* what, uint64_t bytes, int device) {
  return std::string(what) + " a CUDA FIFO of " + std::to_string(bytes) + " bytes on device " +
         std::to_string(device);
}

// A FIFO allocated here: freed on its device at destruction.
class CreatedFifo : public transports::FifoMemory {
 public:
  CreatedFifo(int device, char* ptr) : device_(device), ptr_(ptr) {}
  ~CreatedFifo() override { freeDeviceWhenQuiet(ptr_, device_); }
  CreatedFifo(const CreatedFifo&) = delete;
  CreatedFifo& operator=(const CreatedFifo&) = delete;

  char* base() const override { return ptr_; }
  Blob blob() const override { return blob_; }
  void setBlob(Blob blob) { blob_ = std::move(blob); }

 private:
  int device_;
  char* ptr_;
  Blob blob_;
};

// A peer's FIFO: borrowed (same process; the creator frees it) or mapped
// through IPC (unmapped here at destruction).
class OpenedFifo : public transports::FifoMemory {
 public:
  OpenedFifo(int device, char* ptr, bool ipcMapped) : device_(device), ptr_(ptr), ipcMapped_(ipcMapped) {}
  ~OpenedFifo() override {
    if (ipcMapped_) closeIpcWhenQuiet(ptr_, device_);
  }
  OpenedFifo(const OpenedFifo&) = delete;
  OpenedFifo& operator=(const OpenedFifo&) = delete;

  char* base() const override { return ptr_; }
  Blob blob() const override { return {}; }

 private:
  int device_;
  char* ptr_;
  bool ipcMapped_;
};

// Writes the initial image and waits for it: the peer must never see the
// FIFO before its counters and flags are set.
Result uploadImage(PinnedUpload& upload, char* dst, uint64_t bytes, const transports::FifoImageWriter& writeImage) {
  // operator new's alignment (16) satisfies the image's 8-byte words.
  std::vector<char> image(bytes);
  writeImage(image.data());
  return upload.copy(dst, image.data(), image.size());
}

// Lets `device` address `peer`'s memory (same process, different GPUs).
Result enablePeerAccess(int device, int peer) {
  int can = 0;
  BRAID_CUDA_TRY(cudaDeviceCanAccessPeer(&can, device, peer));
  if (!can)
    return fail(ncclSystemError, "device %d cannot access device %d's memory (cudaDeviceCanAccessPeer is 0): "
                "the ranks on these GPUs cannot share a FIFO in device memory", device, peer);
  const cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();  // not an error here: another FIFO enabled it first
    return Result::success();
  }
  if (err != cudaSuccess) return cudaFailure("cudaDeviceEnablePeerAccess", err);
  return Result::success();
}

class CudaFifoProvider : public transports::FifoMemoryProvider {
 public:
  explicit CudaFifoProvider(int device) : device_(device) {}

  const char* name() const override { return "cuda"; }

  Result create(uint64_t bytes, const transports::FifoImageWriter& writeImage,
                std::unique_ptr<transports::FifoMemory>* out) override {
    Result r = createHere(bytes, writeImage, out);
    // A failed CUDA call must not surface at a later launch's error check.
    if (r.code() == ncclUnhandledCudaError) cudaGetLastError();
    return r.context(deviceContext("creating", bytes, device_));
  }

  Result open(const Blob& blob, uint64_t bytes, std::unique_ptr<transports::FifoMemory>* out) override {
    Result r = openHere(blob, bytes, out);
    if (r.code() == ncclUnhandledCudaError) cudaGetLastError();
    return r.context(deviceContext("opening", bytes, device_));
  }

 private:
  Result createHere(uint64_t bytes, const transports::FifoImageWriter& writeImage,
                    std::unique_ptr<transports::FifoMemory>* out) {
    if (bytes == 0) return fail(ncclInvalidArgument, "the layout has 0 bytes");
    const DeviceGuard guard(device_);
    BRAID_TRY(guard.status());
    void* raw = nullptr;
    BRAID_CUDA_TRY(cudaMalloc(&raw, bytes));
    auto fifo = std::make_unique<CreatedFifo>(device_, static_cast<char*>(raw));
    BRAID_TRY(uploadImage(upload_, fifo->base(), bytes, writeImage));

    CudaFifoBlob b;
    b.pid = cudaFifoPid();
    b.processToken = cudaFifoProcessToken();
    b.device = device_;
    b.address = reinterpret_cast<uintptr_t>(raw);
    b.bytes = bytes;
    // Without a handle the FIFO still serves this process; a peer process
    // gets the reason when it tries to open it.
    const cudaError_t ipc = cudaIpcGetMemHandle(&b.handle, raw);
    if (ipc != cudaSuccess) {
      cudaGetLastError();
      b.ipcError = int32_t(ipc);
      b.handle = cudaIpcMemHandle_t{};
    }
    fifo->setBlob(encodeCudaFifoBlob(b));
    *out = std::move(fifo);
    return Result::success();
  }

  Result openHere(const Blob& blob, uint64_t bytes, std::unique_ptr<transports::FifoMemory>* out) {
    if (bytes == 0) return fail(ncclInvalidArgument, "a FIFO of 0 bytes was asked for");
    CudaFifoBlob b;
    BRAID_TRY(decodeCudaFifoBlob(blob, &b));
    if (bytes > b.bytes)
      return fail(ncclInvalidArgument,
                  "the peer's FIFO is %llu bytes, fewer than this rank's layout of it (%llu): the two ends "
                  "disagree on the FIFO's layout", (unsigned long long)b.bytes, (unsigned long long)bytes);
    const DeviceGuard guard(device_);
    BRAID_TRY(guard.status());
    char* ptr = reinterpret_cast<char*>(uintptr_t(b.address));
    if (b.pid == cudaFifoPid() && b.processToken == cudaFifoProcessToken()) {
      if (b.device != device_) {
        Result r = enablePeerAccess(device_, b.device);
        BRAID_TRY(r.context("the FIFO is on device " + std::to_string(b.device)));
      }
      *out = std::make_unique<OpenedFifo>(device_, ptr, false);
      return Result::success();
    }
    if (b.ipcError != int32_t(cudaSuccess)) {
      const auto err = cudaError_t(b.ipcError);
      return fail(ncclSystemError,
                  "process %d could not export its FIFO on its device %d to other processes "
                  "(cudaIpcGetMemHandle failed: %s (%s))", int(b.pid), int(b.device), cudaGetErrorName(err),
                  cudaGetErrorString(err));
    }
    void* mapped = nullptr;
    const cudaError_t err = cudaIpcOpenMemHandle(&mapped, b.handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      Result r = cudaFailure("cudaIpcOpenMemHandle", err);
      return r.context("mapping process " + std::to_string(b.pid) + "'s FIFO (its device " +
                       std::to_string(b.device) + ")");
    }
    *out = std::make_unique<OpenedFifo>(device_, static_cast<char*>(mapped), true);
    return Result::success();
  }

  int device_;
  PinnedUpload upload_;  // prepared with the first FIFO, next to its cudaMalloc
};

// A FIFO carved from the arena: freed with the arena.
class CarvedFifo : public transports::FifoMemory {
 public:
  CarvedFifo(char* ptr, Blob blob) : ptr_(ptr), blob_(std::move(blob)) {}
  char* base() const override { return ptr_; }
  Blob blob() const override { return blob_; }

 private:
  char* ptr_;
  Blob blob_;
};

class CudaArenaFifoProvider : public transports::FifoMemoryProvider {
 public:
  explicit CudaArenaFifoProvider(int device) : device_(device), fallback_(device) {}
  ~CudaArenaFifoProvider() override {
    freeDeviceWhenQuiet(arena_, device_);
  }
  CudaArenaFifoProvider(const CudaArenaFifoProvider&) = delete;
  CudaArenaFifoProvider& operator=(const CudaArenaFifoProvider&) = delete;

  Result allocate(uint64_t bytes) {
    const DeviceGuard guard(device_);
    BRAID_TRY(guard.status());
    void* raw = nullptr;
    BRAID_CUDA_TRY(cudaMalloc(&raw, bytes));
    arena_ = static_cast<char*>(raw);
    capacity_ = bytes;
    return upload_.prepare();
  }

  const char* name() const override { return "cuda"; }

  Result create(uint64_t bytes, const transports::FifoImageWriter& writeImage,
                std::unique_ptr<transports::FifoMemory>* out) override {
    const uint64_t need = (bytes + 255) & ~uint64_t(255);
    if (bytes == 0 || used_ + need > capacity_) return fallback_.create(bytes, writeImage, out);
    char* ptr = arena_ + used_;
    used_ += need;
    const DeviceGuard guard(device_);
    Result r = guard.status();
    if (r.ok()) r = uploadImage(upload_, ptr, bytes, writeImage);
    if (!r.ok()) {
      if (r.code() == ncclUnhandledCudaError) cudaGetLastError();
      return r.context(deviceContext("creating", bytes, device_));
    }
    CudaFifoBlob b;
    b.pid = cudaFifoPid();
    b.processToken = cudaFifoProcessToken();
    b.device = device_;
    b.address = reinterpret_cast<uintptr_t>(ptr);
    b.bytes = bytes;
    b.ipcError = int32_t(cudaErrorNotSupported);  // carved: not exported to other processes
    *out = std::make_unique<CarvedFifo>(ptr, encodeCudaFifoBlob(b));
    return Result::success();
  }

  Result open(const Blob& blob, uint64_t bytes, std::unique_ptr<transports::FifoMemory>* out) override {
    return fallback_.open(blob, bytes, out);
  }

 private:
  int device_;
  CudaFifoProvider fallback_;
  char* arena_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t used_ = 0;
  PinnedUpload upload_;  // prepared with the arena, before any kernel runs
};

}  // namespace

Result makeCudaArenaFifoProvider(int device, uint64_t arenaBytes,
                                 std::unique_ptr<transports::FifoMemoryProvider>* out) {
  auto provider = std::make_unique<CudaArenaFifoProvider>(device);
  if (arenaBytes > 0) BRAID_TRY(provider->allocate(arenaBytes));
  *out = std::move(provider);
  return Result::success();
}

int32_t cudaFifoPid() { return int32_t(getpid()); }

uint64_t cudaFifoProcessToken() {
  static const uint64_t token = [] {
    std::random_device rd;
    const uint64_t t = (uint64_t(rd()) << 32) ^ uint64_t(rd());
    return t != 0 ? t : 1;
  }();
  return token;
}

Blob encodeCudaFifoBlob(const CudaFifoBlob& b) {
  Blob out;
  BlobWriter w(&out);
  w.put(kBlobMagic).put(kBlobVersion).put(b.pid).put(b.processToken).put(b.device).put(b.address).put(b.bytes);
  w.put(b.ipcError).put(b.handle);
  return out;
}

Result decodeCudaFifoBlob(const Blob& blob, CudaFifoBlob* out) {
  constexpr size_t kSize = 2 * sizeof(uint32_t) + sizeof(int32_t) + sizeof(uint64_t) + sizeof(int32_t) +
                           2 * sizeof(uint64_t) + sizeof(int32_t) + sizeof(cudaIpcMemHandle_t);
  if (blob.size() != kSize)
    return fail(ncclInvalidArgument, "CUDA FIFO blob of %zu bytes, expected %zu", blob.size(), kSize);
  BlobReader r(blob.data(), blob.size());
  uint32_t magic = 0, version = 0;
  CudaFifoBlob b;
  // The size check above makes every get succeed.
  r.get(&magic);
  r.get(&version);
  r.get(&b.pid);
  r.get(&b.processToken);
  r.get(&b.device);
  r.get(&b.address);
  r.get(&b.bytes);
  r.get(&b.ipcError);
  r.get(&b.handle);
  if (magic != kBlobMagic)
    return fail(ncclInvalidArgument, "not a CUDA FIFO blob: magic 0x%08x, expected 0x%08x", magic, kBlobMagic);
  if (version != kBlobVersion)
    return fail(ncclInvalidArgument, "CUDA FIFO blob version %u, this build reads %u (mixed braid versions?)",
                version, kBlobVersion);
  if (b.device < 0) return fail(ncclInvalidArgument, "CUDA FIFO blob names device %d", int(b.device));
  if (b.address == 0) return fail(ncclInvalidArgument, "CUDA FIFO blob has a null address");
  if (b.bytes == 0) return fail(ncclInvalidArgument, "CUDA FIFO blob has a size of 0 bytes");
  *out = b;
  return Result::success();
}

std::unique_ptr<transports::FifoMemoryProvider> makeCudaFifoProvider(int device) {
  return std::make_unique<CudaFifoProvider>(device);
}

}  // namespace braid::p2p
