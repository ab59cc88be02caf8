# Device buffers. Included from the top-level CMakeLists.txt after
# kernels/cuda.cmake and before the layer targets: with BRAID_CUDA on, the
# cuda_*.cc sources of this folder (pointer classification, the staged device
# path and its proxy thread, the plan kernels' launch) and the P2P transport
# (transports/p2p) are built and no_cuda.cc is dropped; without it, the
# reverse, so the host-only library has no CUDA code and answers "not built
# with CUDA" (src/engine/device/device.h).
if(BRAID_CUDA)
  list(APPEND BRAID_EXCLUDED_SOURCES "/src/engine/device/no_cuda\\.cc$")
else()
  list(APPEND BRAID_EXCLUDED_SOURCES "/src/engine/device/cuda_[^/]*\\.cc$" "/transports/p2p/"
    "/src/base/cuda_util\\.cc$" "/src/base/cuda_quiet_free\\.cc$")
endif()
