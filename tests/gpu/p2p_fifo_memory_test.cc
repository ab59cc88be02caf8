// The CUDA FIFO provider (src/transports/p2p/p2p_fifo_memory.h): the blob's
// checks (no GPU needed), and with a GPU: the image a new FIFO holds, opening
// in the same process (the same pointer), refusing corrupted blobs, and a
// FIFO written by another process through CUDA IPC.
//
// The two-process case forks a child that initialises CUDA itself, which only
// works from a process that has not: it comes first in this file (each test
// runs in a process of its own under CTest anyway) and, when an earlier test
// of this process used CUDA, reruns itself in a fresh image of this program.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "kernels/executor/fifo_view.h"
#include "tests/gpu/gpu_env.h"
#include "transports/p2p/p2p_fifo_memory.h"

namespace braid {
namespace executor {
// Test names under CTest: "Bulk"/"LL" rather than the enum's bytes.
void PrintTo(Protocol p, std::ostream* os) { *os << (p == Protocol::LL ? "LL" : "Bulk"); }
}  // namespace executor
}  // namespace braid

namespace {

using braid::executor::FifoLayout;
using braid::executor::Protocol;
using braid::transports::FifoMemory;

// The tests build blobs as text; the providers take bytes.
braid::Blob bytesOf(const std::string& s) { return braid::Blob(s.begin(), s.end()); }
std::string textOf(const braid::Blob& b) { return std::string(b.begin(), b.end()); }

bool gCudaUsedHere = false;  // set before this process's first CUDA call

std::string noGpuHere() {
  gCudaUsedHere = true;
  return gputest::noGpuReasonHere();
}

// Initial counters near 2^32 so that LL flags are not zero.
constexpr uint64_t kBase = (uint64_t(1) << 32) - 1;

FifoLayout testLayout(Protocol proto) { return braid::executor::fifoLayout(proto, 3, 1000); }

std::vector<char> expectedImage(const FifoLayout& l) {
  std::vector<char> image(l.totalBytes);
  braid::executor::initFifoImage(image.data(), l, kBase);
  return image;
}

braid::Result createFifo(braid::transports::FifoMemoryProvider& provider, const FifoLayout& l, std::unique_ptr<FifoMemory>* out) {
  return provider.create(l.totalBytes, [&](char* image) { braid::executor::initFifoImage(image, l, kBase); }, out);
}

uint8_t patternByte(uint64_t i) { return uint8_t(i * 131 + 7); }

std::string cudaError(const char* what, cudaError_t err) {
  return std::string(what) + " failed: " + cudaGetErrorName(err);
}

std::string readBack(const FifoMemory& m, uint64_t bytes, std::vector<char>* out) {
  out->assign(bytes, 0);
  const cudaError_t err = cudaMemcpy(out->data(), m.base(), bytes, cudaMemcpyDeviceToHost);
  return err == cudaSuccess ? "" : cudaError("cudaMemcpy (read back)", err);
}

// ---- pipes between the two processes -----------------------------------------

bool writeAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

bool readAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

bool sendMessage(int fd, const std::string& s) {
  const uint32_t n = uint32_t(s.size());
  return writeAll(fd, &n, sizeof n) && writeAll(fd, s.data(), n);
}

bool receiveMessage(int fd, std::string* s) {
  uint32_t n = 0;
  if (!readAll(fd, &n, sizeof n) || n > (1u << 20)) return false;
  s->resize(n);
  return readAll(fd, &(*s)[0], n);
}

struct Pipe {
  braid::UniqueFd read, write;
  bool open() {
    int fds[2];
    if (pipe(fds) != 0) return false;
    read.reset(fds[0]);
    write.reset(fds[1]);
    return true;
  }
};

// Kills and reaps a child the test did not wait for (a failed assertion).
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  ~Child() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // The exit code, or -1 when it did not exit normally.
  int wait() {
    int status = 0;
    const pid_t pid = std::exchange(pid_, -1);
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_;
};

// The child: opens the parent's FIFO through IPC, checks it sees the
// parent's counters, fills the slots with the pattern. "" or what failed.
std::string childWritesPattern(int blobFd) {
  const FifoLayout l = testLayout(Protocol::LL);
  std::string blob;
  if (!receiveMessage(blobFd, &blob)) return "no blob from the parent";
  cudaError_t err = cudaSetDevice(0);
  if (err != cudaSuccess) return cudaError("cudaSetDevice(0)", err);
  auto provider = braid::p2p::makeCudaFifoProvider(0);
  std::unique_ptr<FifoMemory> mem;
  const braid::Result r = provider->open(bytesOf(blob), l.totalBytes, &mem);
  if (!r.ok()) return "open: " + r.message();
  if (!mem->blob().empty()) return "an opened FIFO has a blob";
  uint64_t head = 0;
  err = cudaMemcpy(&head, mem->base() + l.headOffset, sizeof head, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) return cudaError("cudaMemcpy (head)", err);
  if (head != kBase) return "the child reads head " + std::to_string(head) + ", not the parent's initial value";
  std::vector<uint8_t> pattern(l.totalBytes - l.slotsOffset);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = patternByte(i);
  err = cudaMemcpy(mem->base() + l.slotsOffset, pattern.data(), pattern.size(), cudaMemcpyHostToDevice);
  if (err != cudaSuccess) return cudaError("cudaMemcpy (pattern)", err);
  err = cudaDeviceSynchronize();
  if (err != cudaSuccess) return cudaError("cudaDeviceSynchronize", err);
  mem.reset();  // unmaps while the parent still owns the memory
  return "";
}

// Runs the current test alone in a fresh image of this program.
int rerunInFreshProcess() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter = std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
  const pid_t pid = fork();
  if (pid == 0) {
    char* argv[] = {const_cast<char*>("gpu_p2p_fifo_memory_test"), const_cast<char*>(filter.c_str()), nullptr};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  return pid < 0 ? -1 : Child(pid).wait();
}

TEST(CudaFifoMemoryIpc, ChildProcessWritesParentReads) {
  if (gCudaUsedHere) {
    ASSERT_EQ(rerunInFreshProcess(), 0) << "the test failed in a fresh process (its output is above)";
    return;
  }
  GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonForked());
  signal(SIGPIPE, SIG_IGN);  // a dead child fails a write instead of killing the test
  Pipe toChild, fromChild;
  ASSERT_TRUE(toChild.open() && fromChild.open());
  const pid_t pid = fork();  // before this process's first CUDA call
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    toChild.write.reset();
    fromChild.read.reset();
    const std::string err = childWritesPattern(toChild.read.get());
    const bool reported = sendMessage(fromChild.write.get(), err);
    _exit(err.empty() && reported ? 0 : 1);
  }
  Child child(pid);
  toChild.read.reset();
  fromChild.write.reset();

  gCudaUsedHere = true;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const FifoLayout l = testLayout(Protocol::LL);
  auto provider = braid::p2p::makeCudaFifoProvider(0);
  std::unique_ptr<FifoMemory> mem;
  const braid::Result created = createFifo(*provider, l, &mem);
  ASSERT_TRUE(created.ok()) << created.message();
  ASSERT_TRUE(sendMessage(toChild.write.get(), textOf(mem->blob())));
  std::string childError;
  ASSERT_TRUE(receiveMessage(fromChild.read.get(), &childError)) << "the child died without a report";
  EXPECT_EQ(childError, "");
  EXPECT_EQ(child.wait(), 0);

  std::vector<char> got;
  ASSERT_EQ(readBack(*mem, l.totalBytes, &got), "");
  const std::vector<char> image = expectedImage(l);
  EXPECT_EQ(0, memcmp(got.data(), image.data(), l.slotsOffset)) << "the counters changed";
  for (uint64_t i = l.slotsOffset; i < l.totalBytes; ++i) {
    ASSERT_EQ(uint8_t(got[i]), patternByte(i - l.slotsOffset)) << "byte " << i << " of the slots";
  }
}

// ---- the blob, without CUDA --------------------------------------------------

braid::p2p::CudaFifoBlob sampleBlob() {
  braid::p2p::CudaFifoBlob b;
  b.pid = 1234;
  b.processToken = 0x1122334455667788ull;
  b.device = 3;
  b.address = 0x7f0000001000ull;
  b.bytes = 4096;
  b.ipcError = 0;
  for (size_t i = 0; i < sizeof b.handle.reserved; ++i) b.handle.reserved[i] = char(i * 3 + 1);
  return b;
}

// The refusal's message, or "" when the blob was accepted.
std::string refusal(const std::string& blob) {
  braid::p2p::CudaFifoBlob b;
  const braid::Result r = braid::p2p::decodeCudaFifoBlob(bytesOf(blob), &b);
  if (r.ok()) return "";
  EXPECT_EQ(r.code(), ncclInvalidArgument);
  return r.message();
}

TEST(CudaFifoBlob, RoundTrips) {
  const braid::p2p::CudaFifoBlob in = sampleBlob();
  braid::p2p::CudaFifoBlob out;
  const braid::Result r = braid::p2p::decodeCudaFifoBlob(braid::p2p::encodeCudaFifoBlob(in), &out);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(out.pid, in.pid);
  EXPECT_EQ(out.processToken, in.processToken);
  EXPECT_EQ(out.device, in.device);
  EXPECT_EQ(out.address, in.address);
  EXPECT_EQ(out.bytes, in.bytes);
  EXPECT_EQ(out.ipcError, in.ipcError);
  EXPECT_EQ(0, memcmp(&out.handle, &in.handle, sizeof in.handle));
}

TEST(CudaFifoBlob, RefusesCorruptedBlobs) {
  const std::string good = textOf(braid::p2p::encodeCudaFifoBlob(sampleBlob()));
  EXPECT_EQ(refusal(good), "");
  EXPECT_NE(refusal(good.substr(0, good.size() - 1)).find("expected"), std::string::npos);
  EXPECT_NE(refusal(good + "x").find("expected"), std::string::npos);
  EXPECT_NE(refusal("").find("expected"), std::string::npos);
  std::string badMagic = good;
  badMagic[0] ^= 0x5a;
  EXPECT_NE(refusal(badMagic).find("magic"), std::string::npos);
  std::string badVersion = good;
  badVersion[4] = 9;
  EXPECT_NE(refusal(badVersion).find("version"), std::string::npos);
  braid::p2p::CudaFifoBlob b = sampleBlob();
  b.device = -1;
  EXPECT_NE(refusal(textOf(braid::p2p::encodeCudaFifoBlob(b))).find("device"), std::string::npos);
  b = sampleBlob();
  b.address = 0;
  EXPECT_NE(refusal(textOf(braid::p2p::encodeCudaFifoBlob(b))).find("null address"), std::string::npos);
  b = sampleBlob();
  b.bytes = 0;
  EXPECT_NE(refusal(textOf(braid::p2p::encodeCudaFifoBlob(b))).find("0 bytes"), std::string::npos);
}

// A blob's checks come before any CUDA call, so a provider refuses garbage
// even where no GPU exists.
TEST(CudaFifoBlob, ProviderRefusesGarbageAndZeroBytes) {
  auto provider = braid::p2p::makeCudaFifoProvider(0);
  EXPECT_STREQ(provider->name(), "cuda");
  std::unique_ptr<FifoMemory> mem;
  braid::Result r = provider->open(bytesOf("not a blob"), 4096, &mem);
  EXPECT_EQ(r.code(), ncclInvalidArgument);
  EXPECT_NE(r.message().find("opening a CUDA FIFO of 4096 bytes on device 0"), std::string::npos) << r.message();
  EXPECT_EQ(mem, nullptr);
  r = provider->open(braid::p2p::encodeCudaFifoBlob(sampleBlob()), 0, &mem);
  EXPECT_EQ(r.code(), ncclInvalidArgument);
  EXPECT_NE(r.message().find("0 bytes"), std::string::npos) << r.message();
  r = provider->open(braid::p2p::encodeCudaFifoBlob(sampleBlob()), 4097, &mem);
  EXPECT_EQ(r.code(), ncclInvalidArgument);
  EXPECT_NE(r.message().find("disagree"), std::string::npos) << r.message();
}

// ---- one process, with a GPU ---------------------------------------------------

class CudaFifoMemory : public ::testing::TestWithParam<Protocol> {
 protected:
  void SetUp() override {
    GPU_REQUIRE_OR_SKIP(noGpuHere());
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  }
};

TEST_P(CudaFifoMemory, CreateUploadsTheInitialImage) {
  const FifoLayout l = testLayout(GetParam());
  auto provider = braid::p2p::makeCudaFifoProvider(0);
  std::unique_ptr<FifoMemory> mem;
  const braid::Result r = createFifo(*provider, l, &mem);
  ASSERT_TRUE(r.ok()) << r.message();
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, mem->base()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attr.device, 0);
  std::vector<char> got;
  ASSERT_EQ(readBack(*mem, l.totalBytes, &got), "");
  EXPECT_EQ(got, expectedImage(l));

  braid::p2p::CudaFifoBlob b;
  const braid::Result decoded = braid::p2p::decodeCudaFifoBlob(mem->blob(), &b);
  ASSERT_TRUE(decoded.ok()) << decoded.message();
  EXPECT_EQ(b.pid, int32_t(getpid()));
  EXPECT_EQ(b.processToken, braid::p2p::cudaFifoProcessToken());
  EXPECT_EQ(b.device, 0);
  EXPECT_EQ(b.address, uint64_t(reinterpret_cast<uintptr_t>(mem->base())));
  EXPECT_EQ(b.bytes, l.totalBytes);
  EXPECT_EQ(b.ipcError, 0) << cudaGetErrorName(cudaError_t(b.ipcError));
}

TEST_P(CudaFifoMemory, OpenInTheSameProcessUsesThePointer) {
  const FifoLayout l = testLayout(GetParam());
  auto provider = braid::p2p::makeCudaFifoProvider(0);
  std::unique_ptr<FifoMemory> mem, opened;
  braid::Result r = createFifo(*provider, l, &mem);
  ASSERT_TRUE(r.ok()) << r.message();
  r = provider->open(mem->blob(), l.totalBytes, &opened);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(opened->base(), mem->base());
  EXPECT_TRUE(opened->blob().empty());
  opened.reset();  // borrowed: the creator's memory stays
  std::vector<char> got;
  ASSERT_EQ(readBack(*mem, l.totalBytes, &got), "");
  EXPECT_EQ(got, expectedImage(l));
}

TEST_P(CudaFifoMemory, RefusesCorruptedBlobs) {
  const FifoLayout l = testLayout(GetParam());
  auto provider = braid::p2p::makeCudaFifoProvider(0);
  std::unique_ptr<FifoMemory> mem, opened;
  braid::Result r = createFifo(*provider, l, &mem);
  ASSERT_TRUE(r.ok()) << r.message();
  braid::Blob blob = mem->blob();
  blob[1] ^= 0x21;
  r = provider->open(blob, l.totalBytes, &opened);
  EXPECT_EQ(r.code(), ncclInvalidArgument);
  EXPECT_NE(r.message().find("magic"), std::string::npos) << r.message();
  const braid::Blob whole = mem->blob();
  r = provider->open(braid::Blob(whole.begin(), whole.begin() + 20), l.totalBytes, &opened);
  EXPECT_EQ(r.code(), ncclInvalidArgument);
  EXPECT_NE(r.message().find("expected"), std::string::npos) << r.message();
  r = provider->open(mem->blob(), l.totalBytes + 64, &opened);
  EXPECT_EQ(r.code(), ncclInvalidArgument);
  EXPECT_NE(r.message().find("disagree"), std::string::npos) << r.message();
  EXPECT_EQ(opened, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// A FIFO on device 1 used from device 0 (same process): the pointer, with
// peer access enabled, or a clear refusal where the GPUs cannot reach each
// other. Needs two GPUs.
TEST_P(CudaFifoMemory, OpenFromAnotherDeviceEnablesPeerAccess) {
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  if (n < 2) GTEST_SKIP() << "needs two CUDA devices, found " << n;
  const FifoLayout l = testLayout(GetParam());
  std::unique_ptr<FifoMemory> mem, opened, again;
  braid::Result r = createFifo(*braid::p2p::makeCudaFifoProvider(1), l, &mem);
  ASSERT_TRUE(r.ok()) << r.message();
  auto provider = braid::p2p::makeCudaFifoProvider(0);
  int can = 0;
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
  r = provider->open(mem->blob(), l.totalBytes, &opened);
  if (!can) {
    EXPECT_EQ(r.code(), ncclSystemError);
    EXPECT_NE(r.message().find("cannot access device 1"), std::string::npos) << r.message();
    return;
  }
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(opened->base(), mem->base());
  r = provider->open(mem->blob(), l.totalBytes, &again);  // peer access already on
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(Protocols, CudaFifoMemory, ::testing::Values(Protocol::Bulk, Protocol::LL),
                         [](const ::testing::TestParamInfo<Protocol>& p) {
                           return std::string(p.param == Protocol::LL ? "LL" : "Bulk");
                         });

}  // namespace
