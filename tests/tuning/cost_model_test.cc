// The cost model's formulas: exact values in the simple cases the textbook
// formulas describe, monotonicity, chunking and the small/large crossover.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tuning/calibration.h"
#include "tuning/cost_model.h"

namespace braid {
namespace {

constexpr double kAlpha = 1e-6, kBeta = 2e-10, kGamma = 3e-10, kCopy = 1e-10;

CostParams params() {
  CostParams p;
  p.alpha = kAlpha;
  p.beta = kBeta;
  p.gamma = kGamma;
  p.copyBeta = kCopy;
  return p;
}

ModelShape shape(int p, double n, double chunk = 1 << 20, int channels = 1) {
  ModelShape s;
  s.nranks = p;
  s.bytes = n;
  s.chunkBytes = chunk;
  s.nchannels = channels;
  return s;
}

double t(Collective c, Algorithm a, const ModelShape& s) { return predictSeconds(c, a, s, params()); }

void expectNear(double got, double want) { EXPECT_NEAR(got, want, want * 1e-12) << "want " << want; }

TEST(CostModel, RingAllReduceMatchesTextbookInOneSlice) {
  for (int p : {2, 3, 8}) {
    const double n = 64 * 1024;
    expectNear(t(Collective::AllReduce, Algorithm::Ring, shape(p, n)),
               2 * (p - 1) * kAlpha + 2.0 * (p - 1) / p * n * kBeta + 1.0 * (p - 1) / p * n * kGamma);
  }
}

TEST(CostModel, RingAllReduceCountsAlphaPerSlice) {
  // Slices of p chunks: 4 slices cost 4 * 2(p-1) steps; the bytes terms do not change.
  const int p = 4;
  const double chunk = 4096, n = 4 * p * chunk;
  StepCost c = ringAllReduceCost(shape(p, n, chunk));
  EXPECT_EQ(c.steps, 4 * 2 * (p - 1));
  EXPECT_DOUBLE_EQ(c.bytes, 2.0 * (p - 1) / p * n);
  // A partial slice is a slice too.
  EXPECT_EQ(ringAllReduceCost(shape(p, n + 1, chunk)).steps, 5 * 2 * (p - 1));
}

TEST(CostModel, RingReduceScatterAndAllGather) {
  const int p = 8;
  const double n = 8 * 1024;  // the whole buffer, n/p per rank
  expectNear(t(Collective::ReduceScatter, Algorithm::Ring, shape(p, n)),
             (p - 1) * kAlpha + (p - 1.0) / p * n * (kBeta + kGamma));
  expectNear(t(Collective::AllGather, Algorithm::Ring, shape(p, n)),
             (p - 1) * kAlpha + (p - 1.0) / p * n * kBeta + n / p * kCopy);
}

TEST(CostModel, ChainBroadcastIsAPipeline) {
  // k chunks through p-1 hops: (p-1) + (k-1) step times of one chunk each.
  const int p = 6, k = 10;
  const double c = 8192;
  expectNear(t(Collective::Broadcast, Algorithm::Ring, shape(p, k * c, c)),
             (p - 1 + k - 1) * (kAlpha + c * kBeta));
  expectNear(t(Collective::Reduce, Algorithm::Ring, shape(p, k * c, c)),
             (p - 1 + k - 1) * (kAlpha + c * (kBeta + kGamma)));
}

TEST(CostModel, RecursiveDoublingAllReduceAndFold) {
  const double n = 4096;
  expectNear(t(Collective::AllReduce, Algorithm::RecursiveDoubling, shape(8, n)),
             3 * (kAlpha + n * kBeta + n * kGamma));
  // 6 ranks: 2 rounds among 4, plus the fold in (reducing) and the result back out.
  expectNear(t(Collective::AllReduce, Algorithm::RecursiveDoubling, shape(6, n)),
             4 * (kAlpha + n * kBeta) + 3 * n * kGamma);
}

TEST(CostModel, HalvingDoublingAllReduce) {
  const int p = 16;
  const double n = 64 * 1024;
  expectNear(t(Collective::AllReduce, Algorithm::HalvingDoubling, shape(p, n)),
             2 * 4 * kAlpha + 2.0 * (p - 1) / p * n * kBeta + (p - 1.0) / p * n * kGamma);
  // Non-power of two pays two full-size fold steps and one reduction on top of 8 ranks' cost.
  const double p8 = t(Collective::AllReduce, Algorithm::HalvingDoubling, shape(8, n));
  expectNear(t(Collective::AllReduce, Algorithm::HalvingDoubling, shape(12, n)),
             p8 + 2 * (kAlpha + n * kBeta) + n * kGamma);
}

TEST(CostModel, RecursiveDoublingAllGatherAndDirect) {
  const int p = 8;
  const double n = 8 * 1024;
  expectNear(t(Collective::AllGather, Algorithm::RecursiveDoubling, shape(p, n)),
             3 * kAlpha + (p - 1.0) / p * n * kBeta + n / p * kCopy);
  expectNear(t(Collective::AllToAll, Algorithm::Direct, shape(p, n)),
             (p - 1) * (kAlpha + n / p * kBeta) + n / p * kCopy);
  expectNear(t(Collective::Send, Algorithm::Direct, shape(2, n)), kAlpha + n * kBeta);
}

TEST(CostModel, TreeSplitsOverBothTreesFromTwoChunks) {
  const double c = 65536;
  StepCost one = treeAllReduceCost(shape(8, 2 * c - 4, c));
  StepCost two = treeAllReduceCost(shape(8, 2 * c, c));
  EXPECT_DOUBLE_EQ(one.reducedBytes, 2 * (2 * c - 4));  // an inner rank of the one tree
  EXPECT_DOUBLE_EQ(two.reducedBytes, 2 * c);            // half on each tree
  EXPECT_LT(two.steps, one.steps);
}

TEST(CostModel, TreeIsLogarithmicInRanks) {
  const double n = 1024;
  double t8 = t(Collective::AllReduce, Algorithm::Tree, shape(8, n));
  double t64 = t(Collective::AllReduce, Algorithm::Tree, shape(64, n));
  // log2: 3 -> 6 levels adds 2 * 3 fill steps of one chunk (the whole call, as
  // one chunk stays on one tree); a ring would add 2 * 56 steps.
  EXPECT_NEAR(t64 - t8, 6 * (kAlpha + n * kBeta), 1e-12);
  EXPECT_LT(t(Collective::Broadcast, Algorithm::Tree, shape(64, n)),
            t(Collective::Broadcast, Algorithm::Ring, shape(64, n)));
}

TEST(CostModel, OneRankIsALocalCopy) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                       Collective::Broadcast, Collective::Reduce})
    for (int a = 0; a < kNumAlgorithms; ++a) {
      StepCost cost;
      if (!modelCost(c, static_cast<Algorithm>(a), shape(1, 1000), &cost)) continue;
      EXPECT_EQ(cost.steps, 0) << collectiveName(c) << " " << algorithmName(static_cast<Algorithm>(a));
      EXPECT_EQ(cost.copiedBytes, 1000);
    }
}

TEST(CostModel, UnmodelledPairsAreInfinite) {
  EXPECT_TRUE(std::isinf(t(Collective::AllToAll, Algorithm::Ring, shape(4, 100))));
  EXPECT_TRUE(std::isinf(t(Collective::AllGather, Algorithm::Tree, shape(4, 100))));
  EXPECT_TRUE(std::isinf(t(Collective::AllReduce, Algorithm::Direct, shape(4, 100))));
}

// Every formula grows with the size, the rank count and each parameter.
TEST(CostModel, MonotonicInSizeRanksAndParameters) {
  const Collective colls[] = {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                              Collective::Broadcast, Collective::Reduce,        Collective::AllToAll,
                              Collective::Gather,    Collective::Send};
  for (Collective c : colls)
    for (int a = 0; a < kNumAlgorithms; ++a) {
      const Algorithm algo = static_cast<Algorithm>(a);
      if (std::isinf(t(c, algo, shape(4, 1000)))) continue;
      SCOPED_TRACE(std::string(collectiveName(c)) + " " + algorithmName(algo));
      for (int p : {2, 3, 4, 7, 8, 16, 33}) {
        double prev = 0;
        for (double n = 64; n <= (1u << 28); n *= 4) {
          double cur = t(c, algo, shape(p, n, 256 * 1024));
          EXPECT_GE(cur, prev) << "p=" << p << " n=" << n;
          prev = cur;
        }
      }
      for (double n : {1e3, 1e6, 1e8}) {
        double prev = 0;
        for (int p : {2, 4, 8, 16, 32, 64}) {
          double cur = t(c, algo, shape(p, n, 256 * 1024));
          EXPECT_GE(cur, prev) << "p=" << p << " n=" << n;
          prev = cur;
        }
      }
      const ModelShape s = shape(8, 1e6, 65536);
      const double base = predictSeconds(c, algo, s, params());
      for (int field = 0; field < 3; ++field) {
        CostParams q = params();
        (field == 0 ? q.alpha : field == 1 ? q.beta : q.gamma) *= 2;
        EXPECT_GE(predictSeconds(c, algo, s, q), base) << "parameter " << field;
      }
    }
}

TEST(CostModel, ChannelsShortenTheRingWhenThereIsData) {
  const double chunk = 65536, n = 64 * 8 * chunk;
  EXPECT_LT(ringAllReduceCost(shape(8, n, chunk, 4)).steps, ringAllReduceCost(shape(8, n, chunk, 1)).steps);
  // Too little data for a second lane: the generators use one.
  EXPECT_EQ(ringAllReduceCost(shape(8, chunk / 2, chunk, 4)).steps,
            ringAllReduceCost(shape(8, chunk / 2, chunk, 1)).steps);
}

TEST(CostModel, SmallerChunksPayForPipelinesOnly) {
  const int p = 8;
  const double n = 1 << 20;
  EXPECT_LT(t(Collective::Broadcast, Algorithm::Ring, shape(p, n, 65536)),
            t(Collective::Broadcast, Algorithm::Ring, shape(p, n, 512 * 1024)));
  EXPECT_LT(t(Collective::AllReduce, Algorithm::Tree, shape(p, n, 65536)),
            t(Collective::AllReduce, Algorithm::Tree, shape(p, n, 512 * 1024)));
  EXPECT_GT(t(Collective::AllReduce, Algorithm::Ring, shape(p, n, 4096)),
            t(Collective::AllReduce, Algorithm::Ring, shape(p, n, 512 * 1024)));
  EXPECT_TRUE(isPipelined(Collective::Broadcast, Algorithm::Ring));
  EXPECT_FALSE(isPipelined(Collective::AllReduce, Algorithm::Ring));
}

// With the built-in parameters of every transport class: logarithmic
// algorithms win small calls on 4+ ranks, the ring wins (or ties with the
// bandwidth-optimal halving-doubling) large ones.
TEST(CostModel, CrossoverSmallLogLargeRing) {
  const CalibrationParams cal = defaultCalibration();
  for (int tc = 0; tc < kNumTransportClasses; ++tc) {
    const CostParams cp = costParams(cal, static_cast<TransportClass>(tc), ncclFloat32);
    for (int p : {4, 6, 8, 16, 64}) {
      SCOPED_TRACE(std::string(transportClassName(static_cast<TransportClass>(tc))) + " p=" +
                   std::to_string(p));
      auto at = [&](Algorithm a, double n) {
        return predictSeconds(Collective::AllReduce, a, shape(p, n, 512 * 1024), cp);
      };
      const double small = 1024;
      const double logBest = std::min(at(Algorithm::RecursiveDoubling, small), at(Algorithm::HalvingDoubling, small));
      EXPECT_LT(logBest, at(Algorithm::Ring, small));
      EXPECT_LT(at(Algorithm::RecursiveDoubling, small), at(Algorithm::Ring, small) / 1.5);

      const double large = 256.0 * (1 << 20);
      EXPECT_LT(at(Algorithm::Ring, large), at(Algorithm::RecursiveDoubling, large));
      EXPECT_LT(at(Algorithm::Ring, large), at(Algorithm::Tree, large));
      EXPECT_LE(at(Algorithm::Ring, large), at(Algorithm::HalvingDoubling, large) * 1.01);
      // AllGather: recursive doubling (Bruck's rounds when p is not a power of
      // two) for small, ring no worse for large.
      auto ag = [&](Algorithm a, double n) {
        return predictSeconds(Collective::AllGather, a, shape(p, n, 512 * 1024), cp);
      };
      EXPECT_LT(ag(Algorithm::RecursiveDoubling, small * p), ag(Algorithm::Ring, small * p));
      EXPECT_LE(ag(Algorithm::Ring, large), ag(Algorithm::RecursiveDoubling, large) * 1.01);
    }
  }
}

TEST(CostModel, ModelBytesFollowsNcclCounts) {
  EXPECT_EQ(modelBytes(Collective::AllReduce, 100, 4, 8), 400);
  EXPECT_EQ(modelBytes(Collective::AllGather, 100, 4, 8), 3200);
  EXPECT_EQ(modelBytes(Collective::ReduceScatter, 100, 2, 8), 1600);
  EXPECT_EQ(modelBytes(Collective::AllToAll, 100, 1, 4), 400);
  EXPECT_EQ(modelBytes(Collective::Gather, 100, 4, 8), 400);
}

}  // namespace
}  // namespace braid
