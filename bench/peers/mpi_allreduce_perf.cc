// mpi_allreduce_perf: the all_reduce_perf sweep through MPI_Allreduce
// (float32, MPI_SUM), for racing braid against Open MPI. One rank per process:
//   mpirun -np 2 --bind-to none --mca btl self,vader mpi_allreduce_perf -b 8 -e 64M -f 2
#include <mpi.h>

#include <cstdio>
#include <string>

#include "peers/peer_driver.h"

namespace {
using braid::peers::Backend;

// MPI_COMM_WORLD with MPI's default error handler: any failure aborts the job.
class MpiBackend final : public Backend {
 public:
  MpiBackend() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::string describe() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string v(version, static_cast<size_t>(len));
    const size_t cut = v.find_first_of(",\n");  // the first clause names library and version
    return "MPI_Allreduce from " + v.substr(0, cut);
  }

  void allreduceFloatSum(const float* send, float* recv, size_t count) override {
    const void* src = send == recv ? MPI_IN_PLACE : static_cast<const void*>(send);
    MPI_Allreduce(src, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }

  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }

  double sumAcrossRanks(double v) override {
    double out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return out;
  }

 private:
  int rank_ = 0;
  int size_ = 1;
};

// MPI_Init/Finalize bracket the whole program.
struct MpiSession {
  MpiSession(int* argc, char*** argv) { MPI_Init(argc, argv); }
  ~MpiSession() { MPI_Finalize(); }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  MpiSession session(&argc, &argv);
  MpiBackend backend;
  braid::peers::Options opts;
  std::string error;
  switch (braid::peers::parseOptions(argc, argv, &opts, &error)) {
    case braid::peers::ParseStatus::kHelp:
      if (backend.rank() == 0) braid::peers::printUsage("mpi_allreduce_perf");
      return 0;
    case braid::peers::ParseStatus::kError:
      if (backend.rank() == 0) std::fprintf(stderr, "mpi_allreduce_perf: %s\n", error.c_str());
      return 2;
    case braid::peers::ParseStatus::kOk: break;
  }
  if (opts.maxBytes / sizeof(float) > 0x7fffffffu) {
    if (backend.rank() == 0) std::fprintf(stderr, "mpi_allreduce_perf: -e too large for an int count\n");
    return 2;
  }
  return braid::peers::runSweep(backend, opts, "mpi_allreduce_perf");
}
