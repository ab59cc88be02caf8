// Engine FIFOs between ranks of one process: plain heap memory.
#include <unistd.h>

#include "base/aligned_buffer.h"
#include "transports/fifo_memory.h"
#include "transports/inproc/inproc_transport.h"

namespace braid::inproc {
namespace {

constexpr uint32_t kHeapMagic = 0x4c4e4850;  // "LNHP"

class HeapFifo : public transports::FifoMemory {
 public:
  explicit HeapFifo(AlignedBuffer buffer) : buffer_(std::move(buffer)) {}
  char* base() const override { return reinterpret_cast<char*>(buffer_.data()); }
  Blob blob() const override {
    Blob b;
    BlobWriter(&b).put(kHeapMagic).put(int32_t(getpid())).put(uint64_t(reinterpret_cast<uintptr_t>(base())));
    return b;
  }

 private:
  AlignedBuffer buffer_;
};

// A peer's heap FIFO in this process: borrowed, never freed here.
class BorrowedFifo : public transports::FifoMemory {
 public:
  explicit BorrowedFifo(char* base) : base_(base) {}
  char* base() const override { return base_; }
  Blob blob() const override { return {}; }

 private:
  char* base_;
};

class HeapProvider : public transports::FifoMemoryProvider {
 public:
  const char* name() const override { return "heap"; }
  Result create(uint64_t bytes, const transports::FifoImageWriter& writeImage,
                std::unique_ptr<transports::FifoMemory>* out) override {
    AlignedBuffer buffer(bytes, 4096);
    if (buffer.data() == nullptr)
      return fail(ncclSystemError, "lane FIFO: could not allocate %llu bytes of heap memory",
                  static_cast<unsigned long long>(bytes));
    writeImage(reinterpret_cast<char*>(buffer.data()));
    *out = std::make_unique<HeapFifo>(std::move(buffer));
    return Result::success();
  }
  Result open(const Blob& blob, uint64_t, std::unique_ptr<transports::FifoMemory>* out) override {
    BlobReader r(blob);
    uint32_t magic = 0;
    int32_t pid = 0;
    uint64_t address = 0;
    if (!r.get(&magic) || !r.get(&pid) || !r.get(&address) || !r.atEnd() || magic != kHeapMagic)
      return fail(ncclInternalError, "lane FIFO: malformed heap blob (%zu bytes)", blob.size());
    if (pid != getpid())
      return fail(ncclInternalError, "lane FIFO: a heap FIFO of process %d cannot be used by process %d", pid,
                  int(getpid()));
    *out = std::make_unique<BorrowedFifo>(reinterpret_cast<char*>(uintptr_t(address)));
    return Result::success();
  }
};

}  // namespace

std::unique_ptr<transports::FifoMemoryProvider> makeHeapFifoProvider() { return std::make_unique<HeapProvider>(); }

}  // namespace braid::inproc
