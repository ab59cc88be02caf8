// Data-parallel training as C++ users write it on NCCL: each rank trains the
// same small MLP (8 -> 32 -> 1, tanh) on its own shard of a synthetic
// regression problem, and the gradients are averaged with ncclAllReduce
// before every SGD step, so every rank holds the same weights throughout.
//
// Built from an installed braid (find_package(braid CONFIG), examples/README.md)
// and started like any NCCL job, e.g. with braid's launcher:
//   braidrun -n 4 ./mlp_train [epochs] [--host]
// Built with CUDA (the toolkit found at configure time) and run where a GPU is,
// each rank uses GPU rank % count and its gradients go through device memory
// on a stream, as GPU training code does; without a GPU, or with --host, they
// are averaged in host memory.
// which gives every process BRAID_RANK, BRAID_WORLD_SIZE and NCCL_COMM_ID, so
// that ncclGetUniqueId returns the same id everywhere. Rank 0 prints the loss
// per epoch; every rank checks at the end that its weights are the same bits
// as every other rank's, and exits non-zero if not.
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#if defined(MLP_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace {

constexpr int kIn = 8, kHidden = 32;
constexpr int kSamplesPerRank = 256, kBatch = 32;
constexpr float kLearningRate = 0.05f;

#define CHECK_NCCL(call)                                                                              \
  do {                                                                                                \
    ncclResult_t r_ = (call);                                                                         \
    if (r_ != ncclSuccess) {                                                                          \
      std::fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, #call, ncclGetErrorString(r_),      \
                   ncclGetLastError(nullptr));                                                        \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

// All parameters in one buffer, so one allreduce averages every gradient.
struct Mlp {
  std::vector<float> params = std::vector<float>(kHidden * kIn + kHidden + kHidden + 1);
  float* w1() { return params.data(); }                 // [kHidden][kIn]
  float* b1() { return w1() + kHidden * kIn; }          // [kHidden]
  float* w2() { return b1() + kHidden; }                // [kHidden]
  float* b2() { return w2() + kHidden; }                // [1]
};

// Loss of one sample (0.5 * error^2), its gradient added into `grad`.
float forwardBackward(Mlp& m, Mlp& grad, const float* x, float y) {
  float h[kHidden];
  float out = *m.b2();
  for (int j = 0; j < kHidden; ++j) {
    float a = m.b1()[j];
    for (int i = 0; i < kIn; ++i) a += m.w1()[j * kIn + i] * x[i];
    h[j] = std::tanh(a);
    out += m.w2()[j] * h[j];
  }
  const float err = out - y;
  *grad.b2() += err;
  for (int j = 0; j < kHidden; ++j) {
    grad.w2()[j] += err * h[j];
    const float dh = err * m.w2()[j] * (1.0f - h[j] * h[j]);
    grad.b1()[j] += dh;
    for (int i = 0; i < kIn; ++i) grad.w1()[j * kIn + i] += dh * x[i];
  }
  return 0.5f * err * err;
}

}  // namespace

// Where the gradient allreduce runs: host memory, or a device buffer on a
// stream (the gradients copied in and the average copied back).
class GradientExchange {
 public:
  // Picks this rank's GPU, if it is to use one, before the communicator.
  GradientExchange(int rank, bool hostOnly, size_t count) : count_(count) {
#if defined(MLP_WITH_CUDA)
    int devices = 0;
    if (hostOnly || cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return;
    device_ = rank % devices;
    if (cudaSetDevice(device_) != cudaSuccess || cudaStreamCreate(&stream_) != cudaSuccess ||
        cudaMalloc(&buffer_, count * sizeof(float)) != cudaSuccess) {
      std::fprintf(stderr, "rank %d: CUDA set-up on GPU %d failed: host buffers\n", rank, device_);
      device_ = -1;
    }
#else
    (void)rank;
    (void)hostOnly;
#endif
  }
  ~GradientExchange() {
#if defined(MLP_WITH_CUDA)
    if (buffer_) cudaFree(buffer_);
    if (stream_) cudaStreamDestroy(stream_);
#endif
  }
  GradientExchange(const GradientExchange&) = delete;
  GradientExchange& operator=(const GradientExchange&) = delete;

  std::string where() const { return device_ < 0 ? "host memory" : "device memory of GPU " + std::to_string(device_); }

  // Replaces `grad` by its average over the ranks.
  ncclResult_t average(float* grad, ncclComm_t comm) {
#if defined(MLP_WITH_CUDA)
    if (device_ >= 0) {
      if (cudaMemcpyAsync(buffer_, grad, count_ * sizeof(float), cudaMemcpyHostToDevice, stream_) != cudaSuccess)
        return ncclUnhandledCudaError;
      const ncclResult_t r = ncclAllReduce(buffer_, buffer_, count_, ncclFloat32, ncclAvg, comm, stream_);
      if (r != ncclSuccess) return r;
      if (cudaMemcpyAsync(grad, buffer_, count_ * sizeof(float), cudaMemcpyDeviceToHost, stream_) != cudaSuccess ||
          cudaStreamSynchronize(stream_) != cudaSuccess)
        return ncclUnhandledCudaError;
      return ncclSuccess;
    }
#endif
    // Host buffers: the call returns once it is complete.
    return ncclAllReduce(grad, grad, count_, ncclFloat32, ncclAvg, comm, nullptr);
  }

 private:
  size_t count_;
  int device_ = -1;
#if defined(MLP_WITH_CUDA)
  cudaStream_t stream_ = nullptr;
  float* buffer_ = nullptr;
#endif
};

int main(int argc, char** argv) {
  const int rank = envInt("BRAID_RANK", envInt("RANK", 0));
  const int nranks = envInt("BRAID_WORLD_SIZE", envInt("WORLD_SIZE", 1));
  int epochs = 20;
  bool hostOnly = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--host") == 0) hostOnly = true;
    else epochs = std::atoi(argv[i]);
  }
  GradientExchange exchange(rank, hostOnly, Mlp().params.size());

  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));  // the same on every rank under NCCL_COMM_ID
  ncclComm_t comm = nullptr;
  CHECK_NCCL(ncclCommInitRank(&comm, nranks, id, rank));

  // The same initial weights everywhere (seed 1); each rank's own data.
  Mlp model;
  std::mt19937 init(1);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  for (float& p : model.params) p = normal(init);
  std::mt19937 gen(1000 + rank);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> xs(kSamplesPerRank * kIn), ys(kSamplesPerRank);
  for (int s = 0; s < kSamplesPerRank; ++s) {
    float target = 0.0f;
    for (int i = 0; i < kIn; ++i) {
      xs[s * kIn + i] = uniform(gen);
      target += std::sin(float(i + 1) * xs[s * kIn + i]) / float(i + 1);
    }
    ys[s] = target;
  }

  Mlp grad;
  if (rank == 0) std::printf("gradients averaged in %s\n", exchange.where().c_str());
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    float lossSum = 0.0f;
    for (int b = 0; b < kSamplesPerRank; b += kBatch) {
      std::fill(grad.params.begin(), grad.params.end(), 0.0f);
      for (int s = b; s < b + kBatch; ++s) lossSum += forwardBackward(model, grad, &xs[s * kIn], ys[s]);
      // The average of every rank's batch gradient.
      for (float& g : grad.params) g /= float(kBatch);
      CHECK_NCCL(exchange.average(grad.params.data(), comm));
      for (size_t i = 0; i < model.params.size(); ++i) model.params[i] -= kLearningRate * grad.params[i];
    }
    // The mean loss over every rank's samples this epoch.
    float loss = lossSum / float(kSamplesPerRank);
    CHECK_NCCL(ncclAllReduce(&loss, &loss, 1, ncclFloat32, ncclAvg, comm, nullptr));
    if (rank == 0) std::printf("epoch %3d  loss %.6f\n", epoch, loss);
  }

  // Every rank must hold the same bits: compare with rank 0's weights.
  std::vector<float> rank0 = model.params;
  CHECK_NCCL(ncclBroadcast(rank0.data(), rank0.data(), rank0.size(), ncclFloat32, 0, comm, nullptr));
  int differ = std::memcmp(rank0.data(), model.params.data(), rank0.size() * sizeof(float)) != 0;
  CHECK_NCCL(ncclAllReduce(&differ, &differ, 1, ncclInt32, ncclSum, comm, nullptr));
  if (rank == 0)
    std::printf("%s on every one of %d ranks (%zu parameters)\n", differ ? "weights DIFFER" : "same weights", nranks,
                model.params.size());
  CHECK_NCCL(ncclCommDestroy(comm));
  return differ ? 1 : 0;
}
