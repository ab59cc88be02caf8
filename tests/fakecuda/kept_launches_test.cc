// Plan kernels (BRAID_DEVICE_ENGINE=kernels) of calls a program repeats, from
// a thread per rank, or from one thread's groups over every rank: after the
// first call of each shape a call plans nothing and makes no CUDA allocation,
// no host function and no event, and records one event for its end and one
// per stream it joins (cuda_proxy.h EventPool; cuda_launch_cache.h: the
// lane program and the device block are kept per stream and shape; a watched
// launch's failure word is among its beacons), its image carried in the
// launch where it fits. And a lane's failure still ends every rank's call
// with an error.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "fakecuda.h"

namespace {

constexpr int kRanks = 4;
const std::vector<size_t> kCounts = {64, 5000, 70000};  // float32: LL and bulk, one and several steps

struct Ranks {
  ncclComm_t comms[kRanks] = {};
  std::vector<cudaStream_t> streams = std::vector<cudaStream_t>(kRanks);
  std::vector<std::vector<float*>> bufs = std::vector<std::vector<float*>>(kRanks);

  void init() {
    setenv("BRAID_DEVICE_ENGINE", "kernels", 1);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    int devs[kRanks] = {};
    ASSERT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
    unsetenv("BRAID_DEVICE_ENGINE");
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
      for (size_t n : kCounts) {
        float* b = nullptr;
        ASSERT_EQ(cudaMalloc(&b, n * sizeof(float)), cudaSuccess);
        bufs[r].push_back(b);
      }
    }
  }
  void fill(int value) {
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCounts.size(); ++i) {
        const std::vector<float> v(kCounts[i], float(r + value));
        ASSERT_EQ(cudaMemcpy(bufs[r][i], v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
      }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  // Each rank's thread issues `rounds` allreduces of every size, then syncs
  // (syncEach: after every call, so that at most one launch of a rank is in
  // flight and the events of ended ones are free again).
  std::vector<std::string> run(int rounds, ncclDataType_t rank0Type = ncclFloat32, bool syncEach = false) {
    std::vector<std::string> errors(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        if (cudaSetDevice(0) != cudaSuccess) return void(errors[r] = "cudaSetDevice");
        const ncclDataType_t type = r == 0 ? rank0Type : ncclFloat32;
        for (int k = 0; k < rounds; ++k)
          for (size_t i = 0; i < kCounts.size(); ++i)
            if (ncclAllReduce(bufs[r][i], bufs[r][i], kCounts[i], type, ncclSum, comms[r], streams[r]) != ncclSuccess)
              return void(errors[r] = std::string("ncclAllReduce: ") + ncclGetLastError(comms[r]));
            else if (syncEach && cudaStreamSynchronize(streams[r]) != cudaSuccess)
              return void(errors[r] = "cudaStreamSynchronize");
        if (cudaStreamSynchronize(streams[r]) != cudaSuccess) errors[r] = "cudaStreamSynchronize";
      });
    for (auto& t : threads) t.join();
    return errors;
  }
  // After `rounds` in-place sum allreduces of the buffers fill(1) made: each
  // round multiplies by kRanks after the first sum, (1 + ... + kRanks) *
  // kRanks^(rounds - 1).
  void expectRounds(int rounds) {
    double want = kRanks * (kRanks + 1) / 2.0;
    for (int k = 1; k < rounds; ++k) want *= kRanks;
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCounts.size(); ++i) {
        std::vector<float> got(kCounts[i]);
        ASSERT_EQ(cudaMemcpy(got.data(), bufs[r][i], got.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
        for (size_t e = 0; e < got.size(); e += 61) ASSERT_EQ(got[e], float(want)) << "rank " << r << ", element " << e;
      }
  }
  // One thread driving every rank: `n` rounds of a group over the four ranks
  // per size (the PeerAccess launch: one kernel whose lanes address each
  // other's buffers), then a sync (syncEach: after every group).
  void groups(int n, bool syncEach = false) {
    for (int k = 0; k < n; ++k)
      for (size_t i = 0; i < kCounts.size(); ++i) {
        ASSERT_EQ(ncclGroupStart(), ncclSuccess);
        for (int r = 0; r < kRanks; ++r)
          ASSERT_EQ(ncclAllReduce(bufs[r][i], bufs[r][i], kCounts[i], ncclFloat32, ncclSum, comms[r], streams[r]),
                    ncclSuccess);
        ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
        for (int r = 0; syncEach && r < kRanks; ++r) ASSERT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);
      }
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);
  }
  void destroy() {
    for (int r = 0; r < kRanks; ++r) {
      ncclCommDestroy(comms[r]);
      for (float* b : bufs[r]) cudaFree(b);
      cudaStreamDestroy(streams[r]);
    }
  }
};

// The fake's counts of the CUDA work calls make, at one moment.
struct CudaWork {
  uint64_t allocations = fakecuda::streamOrderedAllocations();
  uint64_t hostFunctions = fakecuda::hostFunctionsLaunched();
  uint64_t records = fakecuda::eventRecords();
  uint64_t queries = fakecuda::pointerQueries();
  uint64_t captureQueries = fakecuda::captureQueries();
  uint64_t deviceQueries = fakecuda::deviceQueries();  // attributes, occupancy
  uint64_t waits = fakecuda::streamWaits();
  uint64_t copies = fakecuda::asyncCopies();
  uint64_t kernels = fakecuda::launchesTracked();
  uint64_t images = fakecuda::launchImages();  // carried in a launch's parameters
  uint64_t pinned = fakecuda::pinnedAllocations();
};

// Each of `launches` carried its image in its parameters: a few KiB for
// these calls' lanes, without the LL lanes' staging (two buffers of the LL
// payload, 64 KiB, per lane), which the lanes write before they read;
// staging in the image would not fit and would make the launch upload it, a
// host memset and a PCIe transfer of every byte on the call's critical path.
void expectCarriedImages(const CudaWork& before, const CudaWork& after, uint64_t launches) {
  EXPECT_EQ(after.images - before.images, launches) << "launches that carried their image";
  EXPECT_EQ(after.copies, before.copies) << "images uploaded";
}

TEST(KeptLaunches, RepeatedCallsAllocateNothingAndLaunchNoHostFunction) {
  Ranks ranks;
  ASSERT_NO_FATAL_FAILURE(ranks.init());
  ASSERT_NO_FATAL_FAILURE(ranks.fill(1));
  for (const std::string& e : ranks.run(1)) ASSERT_EQ(e, "");  // the first call of each shape plans it
  ASSERT_NO_FATAL_FAILURE(ranks.fill(1));
  const CudaWork before;
  constexpr int kRounds = 5;
  for (const std::string& e : ranks.run(kRounds)) ASSERT_EQ(e, "");
  const CudaWork after;
  EXPECT_EQ(after.allocations, before.allocations) << "repeated calls allocated device memory";
  EXPECT_EQ(after.hostFunctions, before.hostFunctions) << "repeated calls launched host functions";
  // Each rank's call is its own launch on its own stream: one record, its end.
  EXPECT_EQ(after.records - before.records, uint64_t(kRounds * kCounts.size() * kRanks));
  // In place: one buffer, one attribute query per call, and one question
  // whether its stream captures a graph.
  EXPECT_EQ(after.queries - before.queries, uint64_t(kRounds * kCounts.size() * kRanks));
  EXPECT_EQ(after.captureQueries - before.captureQueries, uint64_t(kRounds * kCounts.size() * kRanks));
  // What the launch needs of the device was asked when the communicator started.
  EXPECT_EQ(after.deviceQueries, before.deviceQueries) << "repeated calls asked the device's attributes";
  // A rank's launches on its one stream follow each other in stream order.
  EXPECT_EQ(after.waits, before.waits) << "a rank's calls on one stream waited for events";
  expectCarriedImages(before, after, kRounds * kCounts.size() * kRanks);
  ASSERT_NO_FATAL_FAILURE(ranks.expectRounds(kRounds));
  // The events of ended launches are used again: a launch at a time per rank
  // needs no new one (many in flight need as many as they are, once).
  ASSERT_NO_FATAL_FAILURE(ranks.fill(1));
  const uint64_t events = fakecuda::eventsCreated();
  for (const std::string& e : ranks.run(kRounds, ncclFloat32, true)) ASSERT_EQ(e, "");
  EXPECT_EQ(fakecuda::eventsCreated(), events) << "repeated calls made events";
  ASSERT_NO_FATAL_FAILURE(ranks.expectRounds(kRounds));
  ranks.destroy();
}

// One thread driving every rank, each size a group over the four ranks (the
// PeerAccess launch: one kernel whose lanes address each other's buffers):
// after the first group of each size, no allocation and no host function.
TEST(KeptLaunches, OneThreadsGroupsOverEveryRankAllocateNothingAfterTheFirst) {
  Ranks ranks;
  ASSERT_NO_FATAL_FAILURE(ranks.init());
  ASSERT_NO_FATAL_FAILURE(ranks.fill(1));
  ASSERT_NO_FATAL_FAILURE(ranks.groups(1));
  ASSERT_NO_FATAL_FAILURE(ranks.fill(1));
  const CudaWork before;
  constexpr int kRounds = 4;
  ASSERT_NO_FATAL_FAILURE(ranks.groups(kRounds));
  const CudaWork after;
  EXPECT_EQ(after.allocations, before.allocations) << "repeated groups allocated device memory";
  EXPECT_EQ(after.hostFunctions, before.hostFunctions) << "repeated groups launched host functions";
  // A group is one launch on rank 0's stream: one record per other rank's
  // stream it joins, one for its end (the joined streams wait on that one).
  EXPECT_EQ(after.records - before.records, uint64_t(kRounds * kCounts.size() * kRanks));
  EXPECT_EQ(after.queries - before.queries, uint64_t(kRounds * kCounts.size() * kRanks))
      << "a call queries its one buffer's attributes more than once";
  EXPECT_EQ(after.captureQueries - before.captureQueries, uint64_t(kRounds * kCounts.size() * kRanks))
      << "a call asks more than once whether its stream captures";
  EXPECT_EQ(after.deviceQueries, before.deviceQueries) << "repeated groups asked the device's attributes";
  // What else a group's launch costs on the host (part of an 8 B group's
  // time on a GPU, docs/performance.md): rank 0's stream waits for the other
  // three and they for its end (none for the kept block's last launch, on
  // the same stream); its image travels in the launch.
  EXPECT_EQ(after.waits - before.waits, uint64_t(kRounds * kCounts.size() * 2 * (kRanks - 1)));
  expectCarriedImages(before, after, kRounds * kCounts.size());
  EXPECT_EQ(after.kernels - before.kernels, uint64_t(kRounds * kCounts.size()));
  ASSERT_NO_FATAL_FAILURE(ranks.expectRounds(kRounds));
  // One group at a time: no new event.
  ASSERT_NO_FATAL_FAILURE(ranks.fill(1));
  const uint64_t events = fakecuda::eventsCreated();
  ASSERT_NO_FATAL_FAILURE(ranks.groups(kRounds, true));
  EXPECT_EQ(fakecuda::eventsCreated(), events) << "repeated groups made events";
  ASSERT_NO_FATAL_FAILURE(ranks.expectRounds(kRounds));
  ranks.destroy();
}

// A kept launch carries an image of up to 3968 bytes in its parameters
// (kernels/executor/launch_image.h): no copy on the stream before its kernel,
// no pinned staging block. Under BRAID_FAKECUDA_SLOW_IMAGE=1 block 0, which
// writes the image into the device block, starts 20 ms late, so the other
// blocks reach the gate first: without its wait they would run the last
// launch's image, or fresh device memory (0xA5 in the fake; the test process
// crashed when the wait was taken out).
TEST(KeptLaunches, SmallImagesTravelInTheLaunch) {
  Ranks ranks;
  ASSERT_NO_FATAL_FAILURE(ranks.init());
  ASSERT_NO_FATAL_FAILURE(ranks.fill(1));
  // The first call of each shape (a group over every rank, and a rank's
  // call alone) makes its FIFOs and kept block.
  ASSERT_NO_FATAL_FAILURE(ranks.groups(1));
  for (const std::string& e : ranks.run(1)) ASSERT_EQ(e, "");
  ASSERT_NO_FATAL_FAILURE(ranks.fill(1));
  setenv("BRAID_FAKECUDA_SLOW_IMAGE", "1", 1);
  constexpr int kRounds = 3;
  const CudaWork before;
  ASSERT_NO_FATAL_FAILURE(ranks.groups(kRounds));
  for (const std::string& e : ranks.run(kRounds)) ASSERT_EQ(e, "");
  const CudaWork after;
  unsetenv("BRAID_FAKECUDA_SLOW_IMAGE");
  const uint64_t launches = kRounds * kCounts.size() * (1 + kRanks);  // a group's, then each rank's
  EXPECT_EQ(after.kernels - before.kernels, launches);
  EXPECT_EQ(after.images - before.images, launches) << "launches that carried their image";
  EXPECT_EQ(after.copies, before.copies) << "images uploaded";
  EXPECT_EQ(after.pinned, before.pinned);
  ASSERT_NO_FATAL_FAILURE(ranks.expectRounds(2 * kRounds));
  ranks.destroy();
}

// A PreMulSum whose scalar is in device memory (ncclScalarDevice) reads the
// value the stream holds when its kernel runs: its launch uploads the image
// and copies the scalar into it on the stream, never carries the image (the
// kernel's block 0 would write over the copied scalar). The scalar changes
// on the stream between two kept launches of the same shape.
TEST(KeptLaunches, ADeviceScalarIsReadInStreamOrder) {
  Ranks ranks;
  ASSERT_NO_FATAL_FAILURE(ranks.init());
  const size_t count = kCounts[0];
  std::vector<float*> scalars(kRanks);
  std::vector<ncclRedOp_t> ops(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaMalloc(&scalars[r], sizeof(float)), cudaSuccess);
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&ops[r], scalars[r], ncclFloat32, ncclScalarDevice, ranks.comms[r]),
              ncclSuccess);
  }
  const CudaWork before;
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      const std::vector<float> ones(count, 1.0f);
      for (float scalar : {2.0f, 3.0f}) {
        // Both copies on the stream, behind the last call: stream order alone
        // decides which value each call reads.
        if (cudaMemcpyAsync(scalars[r], &scalar, sizeof scalar, cudaMemcpyHostToDevice, ranks.streams[r]) !=
                cudaSuccess ||
            cudaMemcpyAsync(ranks.bufs[r][0], ones.data(), count * sizeof(float), cudaMemcpyHostToDevice,
                            ranks.streams[r]) != cudaSuccess)
          return void(errors[r] = "cudaMemcpyAsync");
        if (ncclAllReduce(ranks.bufs[r][0], ranks.bufs[r][0], count, ncclFloat32, ops[r], ranks.comms[r],
                          ranks.streams[r]) != ncclSuccess)
          return void(errors[r] = std::string("ncclAllReduce: ") + ncclGetLastError(ranks.comms[r]));
        std::vector<float> got(count);
        if (cudaMemcpyAsync(got.data(), ranks.bufs[r][0], count * sizeof(float), cudaMemcpyDeviceToHost,
                            ranks.streams[r]) != cudaSuccess ||
            cudaStreamSynchronize(ranks.streams[r]) != cudaSuccess)
          return void(errors[r] = "copy back");
        for (size_t e = 0; e < count; ++e)
          if (got[e] != scalar * kRanks)
            return void(errors[r] = "scalar " + std::to_string(scalar) + ": element " + std::to_string(e) + " is " +
                                    std::to_string(got[e]));
      }
    });
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(fakecuda::launchImages(), before.images) << "a launch with a device scalar carried its image";
  for (int r = 0; r < kRanks; ++r) {
    ncclRedOpDestroy(ops[r], ranks.comms[r]);
    cudaFree(scalars[r]);
  }
  ranks.destroy();
}

// A kept launch whose block lends itself to launches of other parts: rank 0
// of communicator A leads both a group over A's ranks and a group over A's
// and B's, alternately. Each launch must carry the image of its own parts
// (a kept image is refreshed only for the parts it was written for), so the
// sums stay right.
TEST(KeptLaunches, AKeptImageServesOnlyThePartsItWasWrittenFor) {
  Ranks a, b;
  ASSERT_NO_FATAL_FAILURE(a.init());
  ASSERT_NO_FATAL_FAILURE(b.init());
  ASSERT_NO_FATAL_FAILURE(a.fill(1));
  ASSERT_NO_FATAL_FAILURE(b.fill(1));
  const size_t count = kCounts[0];
  auto group = [&](bool withB) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (Ranks* rs : {&a, &b}) {
      if (rs == &b && !withB) continue;
      for (int r = 0; r < kRanks; ++r)
        ASSERT_EQ(ncclAllReduce(rs->bufs[r][0], rs->bufs[r][0], count, ncclFloat32, ncclSum, rs->comms[r],
                                rs->streams[r]),
                  ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  };
  constexpr int kRounds = 3;
  const CudaWork before;
  for (int k = 0; k < kRounds; ++k) {
    ASSERT_NO_FATAL_FAILURE(group(false));
    ASSERT_NO_FATAL_FAILURE(group(true));
  }
  for (Ranks* rs : {&a, &b})
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(cudaStreamSynchronize(rs->streams[r]), cudaSuccess);
  const CudaWork after;
  EXPECT_EQ(after.images - before.images, uint64_t(2 * kRounds));
  // Sums of (1 + 2 + 3 + 4) times 4 for each later allreduce: A had two per
  // round, B one.
  auto expect = [&](Ranks& rs, int allreduces) {
    float want = 10;
    for (int k = 1; k < allreduces; ++k) want *= kRanks;
    for (int r = 0; r < kRanks; ++r) {
      std::vector<float> got(count);
      ASSERT_EQ(cudaMemcpy(got.data(), rs.bufs[r][0], count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t e = 0; e < count; ++e) ASSERT_EQ(got[e], want) << "rank " << r << ", element " << e;
    }
  };
  ASSERT_NO_FATAL_FAILURE(expect(a, 2 * kRounds));
  ASSERT_NO_FATAL_FAILURE(expect(b, kRounds));
  a.destroy();
  b.destroy();
}

// Lanes of one rank's launch of an allreduce of `count` floats, each thread
// driving its rank; the sums are checked.
// maxCtas > 0: the communicators are made with ncclConfig_t::maxCTAs.
uint32_t lanesOfAllReduce(size_t count, const char* nchannels, int maxCtas = 0) {
  if (nchannels) setenv("BRAID_NCHANNELS", nchannels, 1);
  setenv("BRAID_DEVICE_ENGINE", "kernels", 1);
  EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclComm_t comms[kRanks] = {};
  if (maxCtas > 0) {
    ncclUniqueId id;
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.maxCTAs = maxCtas;
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < kRanks; ++r) ncclCommInitRankConfig(&comms[r], kRanks, id, r, &config);
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  } else {
    int devs[kRanks] = {};
    EXPECT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  }
  unsetenv("BRAID_DEVICE_ENGINE");
  unsetenv("BRAID_NCHANNELS");
  std::vector<float*> bufs(kRanks);
  std::vector<cudaStream_t> streams(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&bufs[r], count * sizeof(float)), cudaSuccess);
    const std::vector<float> v(count, float(r + 1));
    EXPECT_EQ(cudaMemcpy(bufs[r], v.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  fakecuda::takeMostPlanLanes();
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      EXPECT_EQ(ncclAllReduce(bufs[r], bufs[r], count, ncclFloat32, ncclSum, comms[r], streams[r]), ncclSuccess);
      EXPECT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);
    });
  for (auto& t : threads) t.join();
  const uint32_t lanes = fakecuda::takeMostPlanLanes();
  for (int r = 0; r < kRanks; ++r) {
    std::vector<float> got(count);
    EXPECT_EQ(cudaMemcpy(got.data(), bufs[r], count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t e = 0; e < count; e += 4099) EXPECT_EQ(got[e], float(kRanks * (kRanks + 1) / 2)) << "element " << e;
    ncclCommDestroy(comms[r]);
    cudaFree(bufs[r]);
    cudaStreamDestroy(streams[r]);
  }
  return lanes;
}

// A large call spreads over channels (a lane, so a CUDA block, each), as many
// as the emulated GPU's 132 multiprocessors and the FIFO arena allow, and
// ncclConfig_t::maxCTAs; a small call, or BRAID_NCHANNELS=1, keeps one.
TEST(DeviceChannels, LargeCallsSpreadOverChannels) {
  const uint32_t small = lanesOfAllReduce(64, nullptr);
  const CudaWork beforeLarge;
  const uint32_t large = lanesOfAllReduce(size_t(4) << 20, nullptr);
  const CudaWork afterLarge;
  // Sixteen lanes' image is more than a launch carries: uploaded (and the
  // sums are right).
  EXPECT_EQ(afterLarge.images, beforeLarge.images);
  EXPECT_GE(afterLarge.copies - beforeLarge.copies, uint64_t(kRanks));
  const uint32_t fixed = lanesOfAllReduce(size_t(4) << 20, "1");
  const uint32_t capped = lanesOfAllReduce(size_t(4) << 20, nullptr, 3);
  EXPECT_GE(small, 1u);
  EXPECT_EQ(large, 16 * small) << "16 MiB over 16 channels, one lane each as the 64-element call";
  EXPECT_EQ(fixed, small);
  EXPECT_EQ(capped, 3 * small) << "maxCTAs = 3";
}

// Rank 0 calls with another datatype: the peers' lanes fail on its messages
// (their fingerprints differ) and every rank's call ends with an error,
// kept launches or not.
TEST(KeptLaunches, ALaneFailureEndsEveryRanksCallWithAnError) {
  setenv("BRAID_TIMEOUT", "60", 1);
  Ranks ranks;
  ASSERT_NO_FATAL_FAILURE(ranks.init());
  unsetenv("BRAID_TIMEOUT");
  ASSERT_NO_FATAL_FAILURE(ranks.fill(1));
  for (const std::string& e : ranks.run(1)) ASSERT_EQ(e, "");  // kept launches of every shape
  const std::vector<std::string> errors = ranks.run(1, ncclInt32);
  // The watch of a launch reports its lanes' failures from its own thread, a
  // moment after the kernel ends (the stream does not wait for it).
  for (int r = 0; r < kRanks; ++r) {
    ncclResult_t async = ncclSuccess;
    for (int polls = 0; errors[r].empty() && async == ncclSuccess && polls < 1000; ++polls) {
      ASSERT_EQ(ncclCommGetAsyncError(ranks.comms[r], &async), ncclSuccess);
      if (async == ncclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(!errors[r].empty() || async != ncclSuccess) << "rank " << r << " reported no error";
  }
  for (int r = 0; r < kRanks; ++r) ncclCommAbort(ranks.comms[r]);
  for (int r = 0; r < kRanks; ++r) {
    for (float* b : ranks.bufs[r]) cudaFree(b);
    cudaStreamDestroy(ranks.streams[r]);
  }
}

}  // namespace
