// The size of per-peer FIFOs: what an all-to-all maps grows with the rank count,
// so each FIFO shrinks to keep a rank's share bounded.
#include <gtest/gtest.h>

#include "core/init.h"

namespace braid {
namespace {

constexpr size_t kMiB = 1 << 20, kKiB = 1 << 10;

TEST(PeerFifo, SmallJobsKeepTheRingFifoSize) {
  for (int p = 1; p <= 9; ++p) EXPECT_EQ(core::peerFifoBytes(p, 4 * kMiB), 4 * kMiB) << p << " ranks";
}

TEST(PeerFifo, ARanksPeerFifosStayWithinTheBudget) {
  for (int p : {10, 16, 64, 128}) {
    const size_t fifo = core::peerFifoBytes(p, 4 * kMiB);
    EXPECT_LT(fifo, 4 * kMiB) << p << " ranks";
    EXPECT_LE(2 * static_cast<size_t>(p - 1) * fifo, 64 * kMiB) << p << " ranks";
  }
  // 64 ranks of one host: 64 x 63 FIFOs of ~520 KiB, 2 GiB instead of 16 GiB.
  EXPECT_EQ(core::peerFifoBytes(64, 4 * kMiB), 64 * kMiB / 126);
}

TEST(PeerFifo, NeverBelowTheFloorNorAboveTheRingFifo) {
  EXPECT_EQ(core::peerFifoBytes(4096, 4 * kMiB), 256 * kKiB);
  EXPECT_EQ(core::peerFifoBytes(64, 128 * kKiB), 128 * kKiB) << "a small NCCL_BUFFSIZE is kept";
}

}  // namespace
}  // namespace braid
