// Engine FIFOs between processes of one host: a POSIX shm segment each.
#include "transports/fifo_memory.h"
#include "transports/shm/shm_segment.h"
#include "transports/shm/shm_transport.h"

namespace braid::shm {
namespace {

constexpr uint32_t kShmMagic = 0x4c4e5348;  // "LNSH"

class ShmFifo : public transports::FifoMemory {
 public:
  ShmFifo(ShmName name, ShmMapping mapping) : name_(std::move(name)), mapping_(std::move(mapping)) {}
  char* base() const override { return static_cast<char*>(mapping_.data()); }
  Blob blob() const override {
    Blob b;
    if (name_.str().empty()) return b;  // opened: nothing to hand on
    BlobWriter(&b).put(kShmMagic).put(uint64_t(mapping_.size())).putString(name_.str());
    return b;
  }

 private:
  ShmName name_;  // unlinked at destruction; the opener unlinks it earlier
  ShmMapping mapping_;
};

class ShmProvider : public transports::FifoMemoryProvider {
 public:
  const char* name() const override { return "shm"; }
  Result create(uint64_t bytes, const transports::FifoImageWriter& writeImage,
                std::unique_ptr<transports::FifoMemory>* out) override {
    ShmName name;
    ShmMapping mapping;
    BRAID_TRY(createShmSegment(bytes, "a lane FIFO", &name, &mapping));
    writeImage(static_cast<char*>(mapping.data()));
    *out = std::make_unique<ShmFifo>(std::move(name), std::move(mapping));
    return Result::success();
  }
  Result open(const Blob& blob, uint64_t bytes, std::unique_ptr<transports::FifoMemory>* out) override {
    BlobReader r(blob);
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

std::unique_ptr<transports::FifoMemoryProvider> makeShmFifoProvider() { return std::make_unique<ShmProvider>(); }

}  // namespace braid::shm
