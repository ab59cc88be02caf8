// The FIFO-memory providers of lanes that run on host threads.
#include <unistd.h>

#include <cstring>

#include "runtime/lanes/fifo_memory.h"
#include "transports/common/aligned_buffer.h"
#include "transports/common/blob_io.h"
#include "transports/shm/shm_segment.h"

namespace braid {
namespace lanes {
namespace {

constexpr uint32_t kHeapMagic = 0x4c4e4850;  // "LNHP"
constexpr uint32_t kShmMagic = 0x4c4e5348;   // "LNSH"

std::string toString(const Blob& b) { return std::string(b.begin(), b.end()); }
Blob toBlob(const std::string& s) { return Blob(s.begin(), s.end()); }

class HeapFifo : public FifoMemory {
 public:
  explicit HeapFifo(AlignedBuffer buffer) : buffer_(std::move(buffer)) {}
  char* base() const override { return reinterpret_cast<char*>(buffer_.data()); }
  std::string blob() const override {
    Blob b;
    BlobWriter(&b).put(kHeapMagic).put(int32_t(getpid())).put(uint64_t(reinterpret_cast<uintptr_t>(base())));
    return toString(b);
  }

 private:
  AlignedBuffer buffer_;
};

// A peer's heap FIFO in this process: borrowed, never freed here.
class BorrowedFifo : public FifoMemory {
 public:
  explicit BorrowedFifo(char* base) : base_(base) {}
  char* base() const override { return base_; }
  std::string blob() const override { return ""; }

 private:
  char* base_;
};

class HeapProvider : public FifoMemoryProvider {
 public:
  const char* name() const override { return "heap"; }
  Result create(const exec::FifoLayout& layout, uint64_t base, std::unique_ptr<FifoMemory>* out) override {
    AlignedBuffer buffer(layout.totalBytes, 4096);
    if (buffer.data() == nullptr)
      return fail(ncclSystemError, "lane FIFO: could not allocate %llu bytes of heap memory",
                  static_cast<unsigned long long>(layout.totalBytes));
    exec::initFifoImage(reinterpret_cast<char*>(buffer.data()), layout, base);
    *out = std::make_unique<HeapFifo>(std::move(buffer));
    return Result::success();
  }
  Result open(const std::string& blob, uint64_t, std::unique_ptr<FifoMemory>* out) override {
    const Blob b = toBlob(blob);
    BlobReader r(b);
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

class ShmFifo : public FifoMemory {
 public:
  ShmFifo(ShmName name, ShmMapping mapping) : name_(std::move(name)), mapping_(std::move(mapping)) {}
  char* base() const override { return static_cast<char*>(mapping_.data()); }
  std::string blob() const override {
    Blob b;
    BlobWriter(&b).put(kShmMagic).put(uint64_t(mapping_.size())).putString(name_.str());
    return toString(b);
  }

 private:
  ShmName name_;  // unlinked at destruction; the opener unlinks it earlier
  ShmMapping mapping_;
};

class ShmProvider : public FifoMemoryProvider {
 public:
  const char* name() const override { return "shm"; }
  Result create(const exec::FifoLayout& layout, uint64_t base, std::unique_ptr<FifoMemory>* out) override {
    ShmName name;
    ShmMapping mapping;
    BRAID_TRY(createShmSegment(layout.totalBytes, "a lane FIFO", &name, &mapping));
    exec::initFifoImage(static_cast<char*>(mapping.data()), layout, base);
    *out = std::make_unique<ShmFifo>(std::move(name), std::move(mapping));
    return Result::success();
  }
  Result open(const std::string& blob, uint64_t bytes, std::unique_ptr<FifoMemory>* out) override {
    const Blob b = toBlob(blob);
    BlobReader r(b);
    uint32_t magic = 0;
    uint64_t size = 0;
    std::string segment;
    if (!r.get(&magic) || !r.get(&size) || !r.getString(&segment, 255) || !r.atEnd() || magic != kShmMagic)
      return fail(ncclInternalError, "lane FIFO: malformed shm blob (%zu bytes)", blob.size());
    if (size != bytes)
      return fail(ncclInternalError, "lane FIFO: segment %s has %llu bytes, the FIFO needs %llu", segment.c_str(),
                  static_cast<unsigned long long>(size), static_cast<unsigned long long>(bytes));
    ShmMapping mapping;
    BRAID_TRY(openShmSegment(segment, size, "a lane FIFO", &mapping));
    // Mapped by both ends: the name is no longer needed, and /dev/shm keeps
    // nothing if either process dies.
    ShmName(segment).unlink();
    *out = std::make_unique<ShmFifo>(ShmName(), std::move(mapping));
    return Result::success();
  }
};

}  // namespace

std::unique_ptr<FifoMemoryProvider> makeHeapFifoProvider() { return std::make_unique<HeapProvider>(); }
std::unique_ptr<FifoMemoryProvider> makeShmFifoProvider() { return std::make_unique<ShmProvider>(); }

}  // namespace lanes
}  // namespace braid
