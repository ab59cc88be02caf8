// Behaviour of the error-reporting entry points and of the exported stubs for
// NCCL features braid does not provide: every stub must fail with
// ncclInvalidUsage and leave a message naming itself for ncclGetLastError.
#include <braid.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <new>
#include <stdexcept>
#include <set>
#include <string>
#include <thread>

#include "api/api_util.h"

// Later-release and device-API entry points exported by braid but absent from
// its 2.27 header; the team type is NCCL's three-int struct.
struct TestTeam {
  int nRanks, rank, stride;
};
extern "C" {
ncclResult_t ncclCommGrow(ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t*, ncclConfig_t*);
ncclResult_t ncclCommGetUniqueId(ncclComm_t, ncclUniqueId*);
ncclResult_t ncclCommSuspend(ncclComm_t, int);
ncclResult_t ncclCommResume(ncclComm_t);
ncclResult_t ncclCommMemStats(ncclComm_t, int, uint64_t*);
ncclResult_t ncclPutSignal(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int,
                           int, unsigned int, ncclComm_t, cudaStream_t);
ncclResult_t ncclSignal(int, int, int, unsigned int, ncclComm_t, cudaStream_t);
ncclResult_t ncclWaitSignal(int, void*, ncclComm_t, cudaStream_t);
ncclResult_t ncclWinGetUserPtr(ncclComm_t, ncclWindow_t, void**);
ncclResult_t ncclDevCommCreate(ncclComm_t, const void*, void*);
ncclResult_t ncclDevCommDestroy(ncclComm_t, const void*);
TestTeam ncclTeamWorld(ncclComm_t);
TestTeam ncclTeamLsa(ncclComm_t);
TestTeam ncclTeamRail(ncclComm_t);
int ncclTeamRankToWorld(ncclComm_t, TestTeam, int);
int ncclTeamRankToLsa(ncclComm_t, TestTeam, int);
ncclResult_t ncclLsaBarrierCreateRequirement(TestTeam, int, void*, void*);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t, TestTeam, int, void*, void*);
int ncclLLA2ACalcSlots(int, int);
ncclResult_t ncclLLA2ACreateRequirement(int, int, void*, void*);
ncclResult_t pncclCommWindowRegister(ncclComm_t, void*, size_t, ncclWindow_t*, int);
}

namespace {

std::string lastError() { return ncclGetLastError(nullptr); }

TEST(ErrorString, EveryResultHasItsOwnText) {
  std::set<std::string> texts;
  for (int r = ncclSuccess; r < ncclNumResults; ++r) {
    const char* text = ncclGetErrorString(static_cast<ncclResult_t>(r));
    ASSERT_NE(text, nullptr) << "result " << r;
    EXPECT_STRNE(text, "") << "result " << r;
    EXPECT_STRNE(text, "unknown result code") << "result " << r;
    texts.insert(text);
  }
  EXPECT_EQ(texts.size(), static_cast<size_t>(ncclNumResults));
}

TEST(ErrorString, UnknownCodesSaySo) {
  for (int r : {static_cast<int>(ncclNumResults), 42, -1})
    EXPECT_STREQ(ncclGetErrorString(static_cast<ncclResult_t>(r)), "unknown result code") << r;
}

TEST(ErrorString, ProfilingAliasIsTheSameFunction) {
  EXPECT_EQ(&pncclGetErrorString, &ncclGetErrorString);
  EXPECT_EQ(&pncclGetLastError, &ncclGetLastError);
  EXPECT_STREQ(pncclGetErrorString(ncclRemoteError), ncclGetErrorString(ncclRemoteError));
}

TEST(Report, FailureIsRecordedAndReturned) {
  EXPECT_EQ(braid::api::report(braid::fail(ncclSystemError, "socket to rank %d closed", 3)),
            ncclSystemError);
  EXPECT_EQ(lastError(), "socket to rank 3 closed");
  EXPECT_STREQ(braid::api::lastErrorMessage(), ncclGetLastError(nullptr));
}

TEST(Report, SuccessAndInProgressLeaveTheLastErrorAlone) {
  (void)braid::api::report(braid::fail(ncclInvalidArgument, "first failure"));
  EXPECT_EQ(braid::api::report(braid::Result::success()), ncclSuccess);
  EXPECT_EQ(braid::api::report(braid::Result(ncclInProgress, "still connecting")), ncclInProgress);
  EXPECT_EQ(lastError(), "first failure");
}

TEST(Report, EmptyMessageFallsBackToTheResultText) {
  EXPECT_EQ(braid::api::report(braid::Result(ncclRemoteError, "")), ncclRemoteError);
  EXPECT_EQ(lastError(), ncclGetErrorString(ncclRemoteError));
}

TEST(Report, LastErrorBelongsToTheFailingThread) {
  (void)braid::api::report(braid::fail(ncclInternalError, "main thread failure"));
  std::string seenByOther;
  std::thread other([&] {
    seenByOther = lastError();
    (void)braid::api::report(braid::fail(ncclSystemError, "other thread failure"));
  });
  other.join();
  EXPECT_EQ(seenByOther, "");
  EXPECT_EQ(lastError(), "main thread failure");
}

// No exception crosses the C API: an entry point's catch turns it into an
// error naming the call, recorded for ncclGetLastError.
ncclResult_t reportThrown(const std::function<void()>& thrower) {
  try {
    thrower();
  } catch (...) {
    return braid::api::reportException("ncclAllReduce");
  }
  return ncclSuccess;
}

TEST(Report, ExceptionsBecomeErrorsNamingTheCall) {
  EXPECT_EQ(reportThrown([] { throw std::bad_alloc(); }), ncclSystemError);
  EXPECT_EQ(lastError().rfind("ncclAllReduce: out of memory", 0), 0u) << lastError();
  EXPECT_EQ(reportThrown([] { throw std::runtime_error("vector::_M_range_check"); }), ncclInternalError);
  EXPECT_EQ(lastError(), "ncclAllReduce: internal error: vector::_M_range_check");
  EXPECT_EQ(reportThrown([] { throw 42; }), ncclInternalError);
  EXPECT_EQ(lastError(), "ncclAllReduce: internal error (an unknown exception)");
}

// A count whose buffer cannot exist is refused before anything is planned.
TEST(Arguments, CountBeyondTheAddressSpaceIsRefused) {
  ncclComm_t comms[2];
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  float buf[4] = {};
  EXPECT_EQ(ncclAllReduce(buf, buf, SIZE_MAX / 2, ncclFloat32, ncclSum, comms[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("more bytes than a process can address"), std::string::npos) << lastError();
  // 2^45 floats are 2^47 bytes: addressable alone, not once per rank of two.
  EXPECT_EQ(ncclAllGather(buf, buf, size_t(1) << 45, ncclFloat32, comms[0], nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("per rank"), std::string::npos) << lastError();
  EXPECT_EQ(ncclBroadcast(buf, buf, size_t(1) << 46, ncclFloat64, 0, comms[1], nullptr), ncclInvalidArgument);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(NotSupported, MessageNamesFunctionAndReason) {
  EXPECT_EQ(braid::api::notSupported("ncclFrobnicate", "no frobs here"), ncclInvalidUsage);
  const std::string msg = lastError();
  EXPECT_EQ(msg.rfind("ncclFrobnicate is not supported by braid", 0), 0u) << msg;
  EXPECT_NE(msg.find(": no frobs here"), std::string::npos) << msg;
}

struct Stub {
  const char* name;
  std::function<ncclResult_t()> call;
};

TEST(Unsupported, EachStubFailsWithInvalidUsageAndNamesItself) {
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclWindow_t win = nullptr;
  uint64_t value = 0;
  void* ptr = nullptr;
  const Stub stubs[] = {
      {"ncclCommWindowRegister",
       [&] { return ncclCommWindowRegister(comm, &value, sizeof(value), &win, 0); }},
      {"ncclCommWindowRegister",
       [&] { return pncclCommWindowRegister(comm, &value, sizeof(value), &win, 0); }},
      {"ncclCommWindowDeregister", [&] { return ncclCommWindowDeregister(comm, win); }},
      {"ncclCommInitRankScalable",
       [&] { return ncclCommInitRankScalable(&comm, 1, 0, 1, &id, &config); }},
      {"ncclCommGrow", [&] { return ncclCommGrow(comm, 2, &id, 1, &comm, &config); }},
      {"ncclCommGetUniqueId", [&] { return ncclCommGetUniqueId(comm, &id); }},
      {"ncclCommSuspend", [&] { return ncclCommSuspend(comm, 1); }},
      {"ncclCommResume", [&] { return ncclCommResume(comm); }},
      {"ncclCommMemStats", [&] { return ncclCommMemStats(comm, 0, &value); }},
      {"ncclPutSignal",
       [&] {
         return ncclPutSignal(&value, 1, ncclUint64, 0, win, 0, 0, 0, 0, comm, nullptr);
       }},
      {"ncclSignal", [&] { return ncclSignal(0, 0, 0, 0, comm, nullptr); }},
      {"ncclWaitSignal", [&] { return ncclWaitSignal(0, nullptr, comm, nullptr); }},
      {"ncclWinGetUserPtr", [&] { return ncclWinGetUserPtr(comm, win, &ptr); }},
      {"ncclDevCommCreate", [&] { return ncclDevCommCreate(comm, nullptr, nullptr); }},
      {"ncclDevCommDestroy", [&] { return ncclDevCommDestroy(comm, nullptr); }},
      {"ncclLsaBarrierCreateRequirement",
       [&] { return ncclLsaBarrierCreateRequirement(TestTeam{2, 0, 1}, 1, nullptr, nullptr); }},
      {"ncclGinBarrierCreateRequirement",
       [&] {
         return ncclGinBarrierCreateRequirement(comm, TestTeam{2, 0, 1}, 1, nullptr, nullptr);
       }},
      {"ncclLLA2ACreateRequirement",
       [&] { return ncclLLA2ACreateRequirement(1, 1, nullptr, nullptr); }},
  };
  for (const Stub& stub : stubs) {
    (void)braid::api::report(braid::fail(ncclInternalError, "previous error"));
    EXPECT_EQ(stub.call(), ncclInvalidUsage) << stub.name;
    const std::string msg = lastError();
    EXPECT_EQ(msg.rfind(std::string(stub.name) + " is not supported by braid", 0), 0u)
        << stub.name << ": " << msg;
  }
}

TEST(Unsupported, ValueReturningDeviceStubsReturnNeutralValuesAndRecordWhy) {
  const struct {
    const char* name;
    std::function<bool()> returnsNeutral;
  } stubs[] = {
      {"ncclTeamWorld", [] { return ncclTeamWorld(nullptr).nRanks == 0; }},
      {"ncclTeamLsa", [] { return ncclTeamLsa(nullptr).nRanks == 0; }},
      {"ncclTeamRail", [] { return ncclTeamRail(nullptr).nRanks == 0; }},
      {"ncclTeamRankToWorld",
       [] { return ncclTeamRankToWorld(nullptr, TestTeam{4, 1, 1}, 2) == -1; }},
      {"ncclTeamRankToLsa", [] { return ncclTeamRankToLsa(nullptr, TestTeam{4, 1, 1}, 2) == -1; }},
      {"ncclLLA2ACalcSlots", [] { return ncclLLA2ACalcSlots(1024, 8) == 0; }},
  };
  for (const auto& stub : stubs) {
    (void)braid::api::report(braid::fail(ncclInternalError, "previous error"));
    EXPECT_TRUE(stub.returnsNeutral()) << stub.name;
    EXPECT_EQ(lastError().rfind(std::string(stub.name) + " is not supported by braid", 0), 0u)
        << stub.name << ": " << lastError();
  }
}

// Without CUDA in the process ncclMemAlloc gives host memory, page-aligned,
// which host collectives take; ncclMemFree takes it and NULL back.
TEST(MemAlloc, WithoutAGpuGivesWritableHostMemory) {
  void* p = nullptr;
  ASSERT_EQ(ncclMemAlloc(&p, 1 << 20), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  std::memset(p, 0x5a, 1 << 20);
  EXPECT_EQ(static_cast<unsigned char*>(p)[(1 << 20) - 1], 0x5a);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  void* none = &p;
  EXPECT_EQ(ncclMemAlloc(&none, 0), ncclSuccess);
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(ncclMemFree(nullptr), ncclSuccess);
  EXPECT_EQ(ncclMemAlloc(nullptr, 8), ncclInvalidArgument);
}

TEST(Version, StringNamesBraidAndTheNcclApiOfTheHeader) {
  const std::string expected = "(NCCL API " + std::to_string(NCCL_MAJOR) + "." +
                               std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH) + ")";
  const std::string version = braidVersionString();
  EXPECT_EQ(version.rfind("braid ", 0), 0u) << version;
  EXPECT_NE(version.find(expected), std::string::npos) << version;
  EXPECT_EQ(version, "braid 0.1.0 (NCCL API 2.27.7)");
}

}  // namespace
