#include "common/cuda_driver.h"

#include <dlfcn.h>

namespace braid::bench {

// The few driver calls the tools need, with the driver's own names (the
// versioned ones where the driver exports several).
struct CudaDriver::Api {
  using Ptr = unsigned long long;  // CUdeviceptr
  int (*init)(unsigned int);
  int (*deviceGetCount)(int*);
  int (*deviceGet)(int*, int);
  int (*primaryCtxRetain)(void**, int);
  int (*primaryCtxRelease)(int);
  int (*ctxSetCurrent)(void*);
  int (*memAlloc)(Ptr*, size_t);
  int (*memFree)(Ptr);
  int (*memcpyHtoDAsync)(Ptr, const void*, size_t, void*);
  int (*memcpyDtoHAsync)(void*, Ptr, size_t, void*);
  int (*streamCreate)(void**, unsigned int);
  int (*streamDestroy)(void*);
  int (*streamSynchronize)(void*);
  int (*getErrorString)(int, const char**);
  int (*streamBeginCapture)(void*, int);
  int (*streamEndCapture)(void*, void**);
  int (*graphInstantiate)(void**, void*, unsigned long long);
  int (*graphLaunch)(void*, void*);
  int (*graphExecDestroy)(void*);
  int (*graphDestroy)(void*);
};

namespace {

constexpr unsigned int kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING
constexpr int kCaptureThreadLocal = 1;          // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL

template <class F>
bool bind(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

bool loadApi(CudaDriver::Api* a, std::string* error) {
  // Kept loaded on purpose: unloading the driver after cuInit is not supported.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *error = "no CUDA driver (libcuda.so.1 could not be loaded)";
    return false;
  }
  const bool ok = bind(lib, "cuInit", &a->init) && bind(lib, "cuDeviceGetCount", &a->deviceGetCount) &&
                  bind(lib, "cuDeviceGet", &a->deviceGet) &&
                  bind(lib, "cuDevicePrimaryCtxRetain", &a->primaryCtxRetain) &&
                  bind(lib, "cuDevicePrimaryCtxRelease_v2", &a->primaryCtxRelease) &&
                  bind(lib, "cuCtxSetCurrent", &a->ctxSetCurrent) && bind(lib, "cuMemAlloc_v2", &a->memAlloc) &&
                  bind(lib, "cuMemFree_v2", &a->memFree) && bind(lib, "cuMemcpyHtoDAsync_v2", &a->memcpyHtoDAsync) &&
                  bind(lib, "cuMemcpyDtoHAsync_v2", &a->memcpyDtoHAsync) && bind(lib, "cuStreamCreate", &a->streamCreate) &&
                  bind(lib, "cuStreamDestroy_v2", &a->streamDestroy) &&
                  bind(lib, "cuStreamSynchronize", &a->streamSynchronize) &&
                  bind(lib, "cuGetErrorString", &a->getErrorString) &&
                  bind(lib, "cuStreamBeginCapture_v2", &a->streamBeginCapture) &&
                  bind(lib, "cuStreamEndCapture", &a->streamEndCapture) &&
                  bind(lib, "cuGraphInstantiateWithFlags", &a->graphInstantiate) &&
                  bind(lib, "cuGraphLaunch", &a->graphLaunch) && bind(lib, "cuGraphExecDestroy", &a->graphExecDestroy) &&
                  bind(lib, "cuGraphDestroy", &a->graphDestroy);
  if (!ok) *error = "the CUDA driver lacks an entry point the perf tools need (driver too old?)";
  return ok;
}

}  // namespace

std::unique_ptr<CudaDriver> CudaDriver::open(int device, std::string* error) {
  std::unique_ptr<CudaDriver> d(new CudaDriver());
  d->api_ = std::make_unique<Api>();
  if (!loadApi(d->api_.get(), error)) return nullptr;
  const Api& a = *d->api_;
  int n = 0;
  if (d->failed(a.init(0), "cuInit", error) || d->failed(a.deviceGetCount(&n), "cuDeviceGetCount", error))
    return nullptr;
  if (n == 0) {
    *error = "no CUDA device";
    return nullptr;
  }
  d->device_ = device % n;
  if (d->failed(a.deviceGet(&d->cuDevice_, d->device_), "cuDeviceGet", error) ||
      d->failed(a.primaryCtxRetain(&d->context_, d->cuDevice_), "cuDevicePrimaryCtxRetain", error))
    return nullptr;
  void* stream = nullptr;
  if (d->failed(a.ctxSetCurrent(d->context_), "cuCtxSetCurrent", error) ||
      d->failed(a.streamCreate(&stream, kStreamNonBlocking), "cuStreamCreate", error))
    return nullptr;
  d->stream_ = static_cast<cudaStream_t>(stream);
  return d;
}

CudaDriver::~CudaDriver() {
  if (!api_) return;
  if (stream_) api_->streamDestroy(stream_);
  if (context_) api_->primaryCtxRelease(cuDevice_);
}

bool CudaDriver::failed(int result, const char* call, std::string* error) const {
  if (result == 0) return false;
  const char* text = nullptr;
  if (api_->getErrorString(result, &text) != 0 || !text) text = "unknown error";
  *error = std::string(call) + " failed: " + text + " (CUresult " + std::to_string(result) + ")";
  return true;
}

bool CudaDriver::alloc(size_t bytes, void** out, std::string* error) {
  Api::Ptr p = 0;
  if (failed(api_->memAlloc(&p, bytes), "cuMemAlloc", error)) return false;
  *out = reinterpret_cast<void*>(p);
  return true;
}

void CudaDriver::free(void* p) {
  if (p) api_->memFree(reinterpret_cast<Api::Ptr>(p));
}

// On the tool's stream, so that the collectives enqueued after them on it see
// the data (the legacy stream would not order with a non-blocking one).
bool CudaDriver::toDevice(void* dst, const void* src, size_t bytes, std::string* error) {
  return !failed(api_->memcpyHtoDAsync(reinterpret_cast<Api::Ptr>(dst), src, bytes, stream_),
                 "cuMemcpyHtoDAsync", error) &&
         synchronize(error);
}

bool CudaDriver::toHost(void* dst, const void* src, size_t bytes, std::string* error) {
  return !failed(api_->memcpyDtoHAsync(dst, reinterpret_cast<Api::Ptr>(src), bytes, stream_),
                 "cuMemcpyDtoHAsync", error) &&
         synchronize(error);
}

bool CudaDriver::synchronize(std::string* error) {
  return !failed(api_->streamSynchronize(stream_), "cuStreamSynchronize", error);
}

CudaDriver::Graph::~Graph() {
  if (exec_) api_->graphExecDestroy(exec_);
  if (graph_) api_->graphDestroy(graph_);
}

bool CudaDriver::capture(const std::function<bool(std::string*)>& enqueue, Graph* out, std::string* error) {
  if (failed(api_->streamBeginCapture(stream_, kCaptureThreadLocal), "cuStreamBeginCapture", error)) return false;
  const bool enqueued = enqueue(error);
  void* graph = nullptr;
  std::string endError;
  const bool ended = !failed(api_->streamEndCapture(stream_, &graph), "cuStreamEndCapture", &endError);
  out->api_ = api_.get();
  out->graph_ = graph;
  if (!enqueued) return false;
  if (!ended) {
    *error = endError;
    return false;
  }
  return !failed(api_->graphInstantiate(&out->exec_, graph, 0), "cuGraphInstantiateWithFlags", error);
}

bool CudaDriver::launch(const Graph& graph, std::string* error) {
  return !failed(api_->graphLaunch(graph.exec_, stream_), "cuGraphLaunch", error);
}

}  // namespace braid::bench
