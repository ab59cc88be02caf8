// Facts about the process the perf tools print or act on: which NCCL
// library was loaded, whether a CUDA GPU is visible, the host name.
#pragma once

#include <string>

namespace braid::bench {

// Counts CUDA devices through the driver (dlopen("libcuda.so.1"), cuInit,
// cuDeviceGetCount) without linking CUDA. 0 when there is no driver or GPU.
int cudaDeviceCount();

// One line naming the library that serves the nccl* symbols, e.g.
// "braid 0.1.0 (NCCL API 2.27.7) from /x/lib/libbraid.so.0" or
// "NCCL (not braid) version 22803 from /usr/lib/libnccl.so.2".
std::string loadedLibraryDescription();

std::string hostName();

}  // namespace braid::bench
