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

tuning::CostParams params() {
  tuning::CostParams p;
  p.alpha = kAlpha;
  p.beta = kBeta;
  p.gamma = kGamma;
  p.copyBeta = kCopy;
  return p;
}

schedule::ModelShape shape(int p, double n, double chunk = 1 << 20, int channels = 1) {
  schedule::ModelShape s;
  s.nranks = p;
  s.bytes = n;
  s.chunkBytes = chunk;
  s.nchannels = channels;
  return s;
}

double t(schedule::Collective c, schedule::Algorithm a, const schedule::ModelShape& s) { return predictSeconds(c, a, s, params()); }

void expectNear(double got, double want) { EXPECT_NEAR(got, want, want * 1e-12) << "want " << want; }

TEST(CostModel, RingAllReduceMatchesTextbookInOneSlice) {
  for (int p : {2, 3, 8}) {
    const double n = 64 * 1024;
    expectNear(t(schedule::Collective::AllReduce, schedule::Algorithm::Ring, shape(p, n)),
               2 * (p - 1) * kAlpha + 2.0 * (p - 1) / p * n * kBeta + 1.0 * (p - 1) / p * n * kGamma);
  }
}

TEST(CostModel, RingAllReduceCountsAlphaPerSlice) {
  // Slices of p chunks: 4 slices cost 4 * 2(p-1) steps; the bytes terms do not change.
  const int p = 4;
  const double chunk = 4096, n = 4 * p * chunk;
  schedule::StepCost c = ringAllReduceCost(shape(p, n, chunk));
  EXPECT_EQ(c.steps, 4 * 2 * (p - 1));
  EXPECT_DOUBLE_EQ(c.bytes, 2.0 * (p - 1) / p * n);
  // A partial slice is a slice too.
  EXPECT_EQ(ringAllReduceCost(shape(p, n + 1, chunk)).steps, 5 * 2 * (p - 1));
}

TEST(CostModel, RingReduceScatterAndAllGather) {
  const int p = 8;
  const double n = 8 * 1024;  // the whole buffer, n/p per rank
  expectNear(t(schedule::Collective::ReduceScatter, schedule::Algorithm::Ring, shape(p, n)),
             (p - 1) * kAlpha + (p - 1.0) / p * n * (kBeta + kGamma));
  expectNear(t(schedule::Collective::AllGather, schedule::Algorithm::Ring, shape(p, n)),
             (p - 1) * kAlpha + (p - 1.0) / p * n * kBeta + n / p * kCopy);
}

TEST(CostModel, ChainBroadcastIsAPipeline) {
  // k chunks through p-1 hops: (p-1) + (k-1) step times of one chunk each.
  const int p = 6, k = 10;
  const double c = 8192;
  expectNear(t(schedule::Collective::Broadcast, schedule::Algorithm::Ring, shape(p, k * c, c)),
             (p - 1 + k - 1) * (kAlpha + c * kBeta));
  expectNear(t(schedule::Collective::Reduce, schedule::Algorithm::Ring, shape(p, k * c, c)),
             (p - 1 + k - 1) * (kAlpha + c * (kBeta + kGamma)));
}

TEST(CostModel, RecursiveDoublingAllReduceAndFold) {
  const double n = 4096;
  expectNear(t(schedule::Collective::AllReduce, schedule::Algorithm::RecursiveDoubling, shape(8, n)),
             3 * (kAlpha + n * kBeta + n * kGamma));
  // 6 ranks: 2 rounds among 4, plus the fold in (reducing) and the result back out.
  expectNear(t(schedule::Collective::AllReduce, schedule::Algorithm::RecursiveDoubling, shape(6, n)),
             4 * (kAlpha + n * kBeta) + 3 * n * kGamma);
}

TEST(CostModel, HalvingDoublingAllReduce) {
  const int p = 16;
  const double n = 64 * 1024;
  expectNear(t(schedule::Collective::AllReduce, schedule::Algorithm::HalvingDoubling, shape(p, n)),
             2 * 4 * kAlpha + 2.0 * (p - 1) / p * n * kBeta + (p - 1.0) / p * n * kGamma);
  // Non-power of two pays two full-size fold steps and one reduction on top of 8 ranks' cost.
  const double p8 = t(schedule::Collective::AllReduce, schedule::Algorithm::HalvingDoubling, shape(8, n));
  expectNear(t(schedule::Collective::AllReduce, schedule::Algorithm::HalvingDoubling, shape(12, n)),
             p8 + 2 * (kAlpha + n * kBeta) + n * kGamma);
}

TEST(CostModel, RecursiveDoublingAllGatherAndDirect) {
  const int p = 8;
  const double n = 8 * 1024;
  expectNear(t(schedule::Collective::AllGather, schedule::Algorithm::RecursiveDoubling, shape(p, n)),
             3 * kAlpha + (p - 1.0) / p * n * kBeta + n / p * kCopy);
  expectNear(t(schedule::Collective::AllToAll, schedule::Algorithm::Direct, shape(p, n)),
             (p - 1) * (kAlpha + n / p * kBeta) + n / p * kCopy);
  expectNear(t(schedule::Collective::Send, schedule::Algorithm::Direct, shape(2, n)), kAlpha + n * kBeta);
}

TEST(CostModel, TreeSplitsOverBothTreesFromTwoChunks) {
  const double c = 65536;
  schedule::StepCost one = treeAllReduceCost(shape(8, 2 * c - 4, c));
  schedule::StepCost two = treeAllReduceCost(shape(8, 2 * c, c));
  EXPECT_DOUBLE_EQ(one.reducedBytes, 2 * (2 * c - 4));  // an inner rank of the one tree
  EXPECT_DOUBLE_EQ(two.reducedBytes, 2 * c);            // half on each tree
  EXPECT_LT(two.steps, one.steps);
}

TEST(CostModel, TreeIsLogarithmicInRanks) {
  const double n = 1024;
  double t8 = t(schedule::Collective::AllReduce, schedule::Algorithm::Tree, shape(8, n));
  double t64 = t(schedule::Collective::AllReduce, schedule::Algorithm::Tree, shape(64, n));
  // log2: 3 -> 6 levels adds 2 * 3 fill steps of one chunk (the whole call, as
  // one chunk stays on one tree); a ring would add 2 * 56 steps.
  EXPECT_NEAR(t64 - t8, 6 * (kAlpha + n * kBeta), 1e-12);
  EXPECT_LT(t(schedule::Collective::Broadcast, schedule::Algorithm::Tree, shape(64, n)),
            t(schedule::Collective::Broadcast, schedule::Algorithm::Ring, shape(64, n)));
}

TEST(CostModel, OneRankIsALocalCopy) {
  for (schedule::Collective c : {schedule::Collective::AllReduce, schedule::Collective::ReduceScatter, schedule::Collective::AllGather,
                       schedule::Collective::Broadcast, schedule::Collective::Reduce})
    for (int a = 0; a < schedule::kNumAlgorithms; ++a) {
      schedule::StepCost cost;
      if (!tuning::modelCost(c, static_cast<schedule::Algorithm>(a), shape(1, 1000), &cost)) continue;
      EXPECT_EQ(cost.steps, 0) << collectiveName(c) << " " << algorithmName(static_cast<schedule::Algorithm>(a));
      EXPECT_EQ(cost.copiedBytes, 1000);
    }
}

TEST(CostModel, UnmodelledPairsAreInfinite) {
  EXPECT_TRUE(std::isinf(t(schedule::Collective::AllToAll, schedule::Algorithm::Ring, shape(4, 100))));
  EXPECT_TRUE(std::isinf(t(schedule::Collective::AllGather, schedule::Algorithm::Tree, shape(4, 100))));
  EXPECT_TRUE(std::isinf(t(schedule::Collective::AllReduce, schedule::Algorithm::Direct, shape(4, 100))));
}

// Every formula grows with the size, the rank count and each parameter.
TEST(CostModel, MonotonicInSizeRanksAndParameters) {
  const schedule::Collective colls[] = {schedule::Collective::AllReduce, schedule::Collective::ReduceScatter, schedule::Collective::AllGather,
                              schedule::Collective::Broadcast, schedule::Collective::Reduce,        schedule::Collective::AllToAll,
                              schedule::Collective::Gather,    schedule::Collective::Send};
  for (schedule::Collective c : colls)
    for (int a = 0; a < schedule::kNumAlgorithms; ++a) {
      const schedule::Algorithm algo = static_cast<schedule::Algorithm>(a);
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
      const schedule::ModelShape s = shape(8, 1e6, 65536);
      const double base = predictSeconds(c, algo, s, params());
      for (int field = 0; field < 3; ++field) {
        tuning::CostParams q = params();
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
  EXPECT_LT(t(schedule::Collective::Broadcast, schedule::Algorithm::Ring, shape(p, n, 65536)),
            t(schedule::Collective::Broadcast, schedule::Algorithm::Ring, shape(p, n, 512 * 1024)));
  EXPECT_LT(t(schedule::Collective::AllReduce, schedule::Algorithm::Tree, shape(p, n, 65536)),
            t(schedule::Collective::AllReduce, schedule::Algorithm::Tree, shape(p, n, 512 * 1024)));
  EXPECT_GT(t(schedule::Collective::AllReduce, schedule::Algorithm::Ring, shape(p, n, 4096)),
            t(schedule::Collective::AllReduce, schedule::Algorithm::Ring, shape(p, n, 512 * 1024)));
  EXPECT_TRUE(tuning::isPipelined(schedule::Collective::Broadcast, schedule::Algorithm::Ring));
  EXPECT_FALSE(tuning::isPipelined(schedule::Collective::AllReduce, schedule::Algorithm::Ring));
}

// With the built-in parameters of every transport class: logarithmic
// algorithms win small calls on 4+ ranks, the ring wins (or ties with the
// bandwidth-optimal halving-doubling) large ones.
TEST(CostModel, CrossoverSmallLogLargeRing) {
  const tuning::CalibrationParams cal = tuning::defaultCalibration();
  for (int tc = 0; tc < tuning::kNumTransportClasses; ++tc) {
    const tuning::CostParams cp = costParams(cal, static_cast<tuning::TransportClass>(tc), ncclFloat32);
    for (int p : {4, 6, 8, 16, 64}) {
      SCOPED_TRACE(std::string(transportClassName(static_cast<tuning::TransportClass>(tc))) + " p=" +
                   std::to_string(p));
      auto at = [&](schedule::Algorithm a, double n) {
        return predictSeconds(schedule::Collective::AllReduce, a, shape(p, n, 512 * 1024), cp);
      };
      const double small = 1024;
      const double logBest = std::min(at(schedule::Algorithm::RecursiveDoubling, small), at(schedule::Algorithm::HalvingDoubling, small));
      EXPECT_LT(logBest, at(schedule::Algorithm::Ring, small));
      EXPECT_LT(at(schedule::Algorithm::RecursiveDoubling, small), at(schedule::Algorithm::Ring, small) / 1.5);

      const double large = 256.0 * (1 << 20);
      EXPECT_LT(at(schedule::Algorithm::Ring, large), at(schedule::Algorithm::RecursiveDoubling, large));
      EXPECT_LT(at(schedule::Algorithm::Ring, large), at(schedule::Algorithm::Tree, large));
      EXPECT_LE(at(schedule::Algorithm::Ring, large), at(schedule::Algorithm::HalvingDoubling, large) * 1.01);
      // AllGather: recursive doubling (Bruck's rounds when p is not a power of
      // two) for small, ring no worse for large.
      auto ag = [&](schedule::Algorithm a, double n) {
        return predictSeconds(schedule::Collective::AllGather, a, shape(p, n, 512 * 1024), cp);
      };
      EXPECT_LT(ag(schedule::Algorithm::RecursiveDoubling, small * p), ag(schedule::Algorithm::Ring, small * p));
      EXPECT_LE(ag(schedule::Algorithm::Ring, large), ag(schedule::Algorithm::RecursiveDoubling, large) * 1.01);
    }
  }
}

TEST(CostModel, ModelBytesFollowsNcclCounts) {
  EXPECT_EQ(tuning::modelBytes(schedule::Collective::AllReduce, 100, 4, 8), 400);
  EXPECT_EQ(tuning::modelBytes(schedule::Collective::AllGather, 100, 4, 8), 3200);
  EXPECT_EQ(tuning::modelBytes(schedule::Collective::ReduceScatter, 100, 2, 8), 1600);
  EXPECT_EQ(tuning::modelBytes(schedule::Collective::AllToAll, 100, 1, 4), 400);
  EXPECT_EQ(tuning::modelBytes(schedule::Collective::Gather, 100, 4, 8), 400);
}

// Chunks of the whole message or more all cost the same (one chunk per
// step), in every schedule, so the planner prices one such size, not each
// (bestChunk, tuning/planner.cc).
TEST(CostModel, ChunksOfTheWholeMessageOrMoreCostTheSame) {
  int checked = 0;
  for (int c = 0; c <= static_cast<int>(schedule::Collective::Recv); ++c)
    for (int a = 0; a < schedule::kNumAlgorithms; ++a) {
      const auto coll = static_cast<schedule::Collective>(c);
      const auto algo = static_cast<schedule::Algorithm>(a);
      for (int p : {2, 3, 4, 5, 8, 16})
        for (double n : {8.0, 100.0, 4096.0, 1e6})
          for (int channels : {1, 2, 4}) {
            const double whole = t(coll, algo, shape(p, n, n, channels));
            if (std::isinf(whole)) continue;
            ++checked;
            for (double chunk : {n + 8, 2 * n, 64 * n, 1e12})
              EXPECT_EQ(t(coll, algo, shape(p, n, chunk, channels)), whole)
                  << collectiveName(coll) << " " << algorithmName(algo) << " p " << p << " n " << n << " channels "
                  << channels << " chunk " << chunk;
          }
    }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace braid
