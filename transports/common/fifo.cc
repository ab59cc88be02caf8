#include "transports/common/fifo.h"

#include <nccl.h>

#include <cstring>

namespace braid {
namespace fifo {

Result makeLayout(size_t slotBytes, int nslots, Layout* out) {
  if (slotBytes == 0 || nslots <= 0)
    return fail(ncclInvalidArgument, "FIFO of %d slots of %zu bytes: both must be positive",
                nslots, slotBytes);
  Layout l;
  l.slotBytes = slotBytes;
  l.nslots = static_cast<uint32_t>(nslots);
  // Page-aligned slots for large buffers (DMA and kernel friendly), cache-line
  // aligned for small ones so tiny FIFOs stay tiny.
  const size_t align = slotBytes >= kPage ? kPage : kCacheLine;
  size_t data = 0;
  if (slotBytes > SIZE_MAX - align ||
      __builtin_mul_overflow(roundUp(slotBytes, align), static_cast<size_t>(nslots), &data))
    return fail(ncclInvalidArgument, "FIFO of %d slots of %zu bytes overflows size_t", nslots,
                slotBytes);
  l.slotStride = roundUp(slotBytes, align);
  l.dataOffset = roundUp(kSizesOffset + sizeof(uint64_t) * l.nslots, kPage);
  if (data > SIZE_MAX - l.dataOffset)
    return fail(ncclInvalidArgument, "FIFO of %d slots of %zu bytes overflows size_t", nslots,
                slotBytes);
  l.totalBytes = l.dataOffset + data;
  *out = l;
  return Result::success();
}

void Region::initialize() {
  Control* c = new (base_) Control();
  c->magic = kMagic;
  c->slotBytes = layout_.slotBytes;
  c->slotStride = layout_.slotStride;
  c->totalBytes = layout_.totalBytes;
  c->nslots = layout_.nslots;
  c->attached.store(0, std::memory_order_relaxed);
  c->head.store(0, std::memory_order_relaxed);
  c->tail.store(0, std::memory_order_relaxed);
  memset(sizes(), 0, sizeof(uint64_t) * layout_.nslots);
}

Result Region::validate() const {
  const Control* c = control();
  if (c->magic != kMagic || c->slotBytes != layout_.slotBytes ||
      c->slotStride != layout_.slotStride || c->nslots != layout_.nslots ||
      c->totalBytes != layout_.totalBytes)
    return fail(ncclInternalError,
                "FIFO region does not match the expected geometry (%u x %zu bytes): the peer "
                "runs a different braid build or the region was overwritten",
                layout_.nslots, layout_.slotBytes);
  return Result::success();
}

}  // namespace fifo
}  // namespace braid
