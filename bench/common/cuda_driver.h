// Device memory for the perf tools through the CUDA driver API, loaded at run
// time (dlopen("libcuda.so.1")): the tools build and run without CUDA, and on
// a GPU machine allocate, copy and synchronise in the device's primary
// context, which the CUDA runtime inside braid (or NVIDIA's NCCL) shares.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace braid::bench {

class CudaDriver {
 public:
  struct Api;  // the driver entry points (cuda_driver.cc)

  // Loads the driver, makes `device`'s primary context current and creates a
  // non-blocking stream; null with *error set when there is no usable GPU.
  static std::unique_ptr<CudaDriver> open(int device, std::string* error);
  ~CudaDriver();  // destroys the stream, releases the context
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  // Each returns false with *error set (naming the call and CUDA's message).
  // Copies run on stream() and return once done.
  bool alloc(size_t bytes, void** out, std::string* error);
  void free(void* p);
  bool toDevice(void* dst, const void* src, size_t bytes, std::string* error);
  bool toHost(void* dst, const void* src, size_t bytes, std::string* error);
  bool synchronize(std::string* error);

  // A CUDA graph captured from stream(): what `enqueue` put on the stream
  // between the start and the end of the capture, ready to launch there.
  class Graph {
   public:
    Graph() = default;
    ~Graph();
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;

   private:
    friend class CudaDriver;
    const Api* api_ = nullptr;
    void* graph_ = nullptr;
    void* exec_ = nullptr;
  };
  // `enqueue` returns false (with *error set) to abandon the capture.
  bool capture(const std::function<bool(std::string*)>& enqueue, Graph* out, std::string* error);
  bool launch(const Graph& graph, std::string* error);


 private:
  CudaDriver() = default;
  bool failed(int result, const char* call, std::string* error) const;

  std::unique_ptr<Api> api_;
  int device_ = -1;
  int cuDevice_ = 0;
  void* context_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace braid::bench
