// The NCCL entry points of libbraid, looked up by dlsym in a library opened
// with RTLD_LOCAL. Linking them by name would let another libnccl.so.2 already
// loaded into the process (PyTorch's CUDA wheels bring NVIDIA's) win symbol
// resolution, and that library cannot run collectives on host memory.
#pragma once

#include <nccl.h>

#include <map>
#include <string>

namespace braid_torch {

struct BraidApi {
  ncclResult_t (*getUniqueId)(ncclUniqueId*);
  ncclResult_t (*commInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*commDestroy)(ncclComm_t);
  const char* (*getErrorString)(ncclResult_t);
  const char* (*getLastError)(ncclComm_t);
  ncclResult_t (*groupStart)();
  ncclResult_t (*groupEnd)();
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                         cudaStream_t);
  ncclResult_t (*allGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                cudaStream_t);
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*redOpCreatePreMulSum)(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t,
                                       ncclComm_t);
  ncclResult_t (*redOpDestroy)(ncclRedOp_t, ncclComm_t);
  const char* (*versionString)();
  // Optional: present once libbraid has a device path. Null: host memory only.
  int (*supportsDeviceBuffers)();
  // Optional extensions of include/braid.h; null in a library without them (an
  // older braid), where the caller falls back to steering libbraid through the
  // environment.
  ncclResult_t (*commSetTimeout)(ncclComm_t, double);
  ncclResult_t (*getPrivateUniqueId)(ncclUniqueId*);
  ncclResult_t (*commInitRankTimeout)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*, double);
  ncclResult_t (*commSetReproducible)(ncclComm_t, int);
  ncclResult_t (*commSetWireType)(ncclComm_t, ncclDataType_t);
  ncclResult_t (*wireRoundTrip)(const float*, float*, size_t, ncclDataType_t);
};

// Opens the library at `path` (a file name the loader searches for, or a path)
// once per process; later calls must name the same path. Returns braid's
// version string. Throws std::runtime_error naming the path and the missing
// symbol, or saying that the library is not braid.
std::string loadBraid(const std::string& path);

// The loaded API; throws if loadBraid has not succeeded.
const BraidApi& braid();

// The path loadBraid opened ("" before).
std::string loadedBraidPath();

// The optional symbols above, by name, and whether the loaded library has each.
std::map<std::string, bool> optionalSymbols();

// Whether the loaded libbraid can run collectives on CUDA device memory: it
// exports braidSupportsDeviceBuffers() and that returns non-zero, or the user
// vouches for it with BRAID_TORCH_ALLOW_CUDA=1. A libbraid without a device
// path would read device pointers as host memory and crash.
bool deviceBuffersSupported();

}  // namespace braid_torch
