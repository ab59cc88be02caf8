// gloo_allreduce_perf: the all_reduce_perf sweep through gloo::allreduce
// (float32 sum, Gloo's default ring algorithm) over Gloo's TCP transport, for
// racing braid's TCP transport against Gloo. One rank per process, started by
// braidrun (or any launcher braid's tools understand):
//   braidrun -n 2 gloo_allreduce_perf -b 8 -e 64M -f 2
// The ranks meet through a gloo FileStore in a directory they share:
// GLOO_PERF_STORE when set (the caller creates and removes it), else a fresh
// directory under $TMPDIR named after the launcher's pid and NCCL_COMM_ID,
// which rank 0 removes at the end. GLOO_PERF_HOST: the address to listen on
// (default 127.0.0.1).
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>

#include "common/launch_env.h"
#include "peers/peer_driver.h"

namespace {
using braid::peers::Backend;
namespace fs = std::filesystem;

constexpr auto kTimeout = std::chrono::seconds(120);

// gloo::sum is overloaded: name the element-wise form AllreduceOptions wants.
using ReduceFn = void (*)(void*, const void*, const void*, size_t);
const ReduceFn kSumFloat = &gloo::sum<float>;
const ReduceFn kSumDouble = &gloo::sum<double>;

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// Where the ranks meet; *owned: this program made the name up and cleans up.
fs::path storeDir(bool* owned) {
  if (const char* given = std::getenv("GLOO_PERF_STORE"); given && *given) {
    *owned = false;
    return given;
  }
  *owned = true;
  std::string tag = std::to_string(getppid()) + "-" + envOr("NCCL_COMM_ID", "local");
  for (char& c : tag)
    if (c == ':' || c == '/') c = '_';
  return fs::path(envOr("TMPDIR", "/tmp")) / ("gloo_allreduce_perf." + tag);
}

class GlooBackend final : public Backend {
 public:
  GlooBackend(int rank, int size, const fs::path& store) {
    gloo::transport::tcp::attr attr;
    attr.hostname = envOr("GLOO_PERF_HOST", "127.0.0.1");
    auto device = gloo::transport::tcp::CreateDevice(attr);
    fs::create_directories(store);
    gloo::rendezvous::FileStore files(store.string());
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(kTimeout);
    context->connectFullMesh(files, device);
    context_ = std::move(context);
  }

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  std::string describe() const override {
    return "gloo::allreduce (ring), Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
           std::to_string(GLOO_VERSION_MINOR) + "." + std::to_string(GLOO_VERSION_PATCH) + ", TCP transport";
  }

  // The options are kept while the buffers stay the same, so the timed loop
  // measures the collective and not the set-up of its buffer handles.
  void allreduceFloatSum(const float* send, float* recv, size_t count) override {
    if (!cached_ || send != cachedSend_ || recv != cachedRecv_ || count != cachedCount_) {
      cached_ = std::make_unique<gloo::AllreduceOptions>(context_);
      if (send != recv) cached_->setInput(const_cast<float*>(send), count);  // input only: Gloo never writes it
      cached_->setOutput(recv, count);
      cached_->setReduceFunction(kSumFloat);
      cachedSend_ = send;
      cachedRecv_ = recv;
      cachedCount_ = count;
    }
    gloo::allreduce(*cached_);
  }

  void barrier() override {
    gloo::BarrierOptions opts(context_);
    gloo::barrier(opts);
  }

  double sumAcrossRanks(double v) override {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(&v, 1);
    opts.setReduceFunction(kSumDouble);
    gloo::allreduce(opts);
    return v;
  }

 private:
  std::shared_ptr<gloo::Context> context_;
  std::unique_ptr<gloo::AllreduceOptions> cached_;
  const float* cachedSend_ = nullptr;
  const float* cachedRecv_ = nullptr;
  size_t cachedCount_ = 0;
};

int runTool(int argc, char** argv) {
  const char* tool = "gloo_allreduce_perf";
  braid::peers::Options opts;
  std::string error;
  switch (braid::peers::parseOptions(argc, argv, &opts, &error)) {
    case braid::peers::ParseStatus::kHelp: braid::peers::printUsage(tool); return 0;
    case braid::peers::ParseStatus::kError: std::fprintf(stderr, "%s: %s\n", tool, error.c_str()); return 2;
    case braid::peers::ParseStatus::kOk: break;
  }
  braid::bench::LaunchEnv env;
  if (!braid::bench::detectLaunchEnv(&env, &error)) {
    std::fprintf(stderr, "%s: %s\n", tool, error.c_str());
    return 2;
  }
  bool ownStore = false;
  const fs::path store = storeDir(&ownStore);
  int status = 0;
  {
    GlooBackend backend(env.rank, env.size, store);
    status = braid::peers::runSweep(backend, opts, tool);
    backend.barrier();  // nobody reads the store any more
  }
  if (ownStore && env.rank == 0) {
    std::error_code ignored;
    fs::remove_all(store, ignored);
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    return runTool(argc, argv);
  } catch (const std::exception& e) {
    // Gloo reports failures (timeouts, lost peers) by exceptions.
    std::fprintf(stderr, "gloo_allreduce_perf: %s\n", e.what());
    return 1;
  }
}
