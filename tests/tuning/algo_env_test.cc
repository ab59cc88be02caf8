// NCCL_ALGO / NCCL_PROTO parsing: every syntax form NCCL accepts, braid's
// names and aliases, NCCL-only names, unknown names.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tuning/algo_env.h"

namespace braid {
namespace {

using A = schedule::Algorithm;
using C = schedule::Collective;
using P = tuning::Protocol;

uint8_t bits(std::initializer_list<A> as) {
  uint8_t m = 0;
  for (A a : as) m |= 1u << static_cast<int>(a);
  return m;
}
uint8_t bits(std::initializer_list<P> ps) {
  uint8_t m = 0;
  for (P p : ps) m |= 1u << static_cast<int>(p);
  return m;
}
constexpr uint8_t kAllAlgos = (1u << schedule::kNumAlgorithms) - 1;
constexpr uint8_t kAllProtos = (1u << tuning::kNumProtocols) - 1;

uint8_t algos(const tuning::AlgoFilter& f, C c) { return f.algos[static_cast<int>(c)]; }
uint8_t protos(const tuning::AlgoFilter& f, C c) { return f.protos[static_cast<int>(c)]; }
bool forced(const tuning::AlgoFilter& f, C c) { return f.algoForced[static_cast<int>(c)]; }

TEST(AlgoEnv, UnsetAllowsEverything) {
  for (const char* v : {static_cast<const char*>(nullptr), ""}) {
    tuning::AlgoFilter f = tuning::parseAlgoFilter(v, v);
    for (int c = 0; c < tuning::kNumCollectives; ++c) {
      EXPECT_EQ(f.algos[c], kAllAlgos);
      EXPECT_EQ(f.protos[c], kAllProtos);
      EXPECT_FALSE(f.algoForced[c] || f.protoForced[c]);
    }
  }
  EXPECT_EQ(describeAlgoFilter(tuning::AlgoFilter()), "no restriction");
}

TEST(AlgoEnv, GlobalListIsCaseInsensitiveAndSkipsPointToPoint) {
  tuning::AlgoFilter f = tuning::parseAlgoFilter("ring,TREE", nullptr);
  for (C c : {C::AllReduce, C::ReduceScatter, C::AllGather, C::Broadcast, C::Reduce}) {
    EXPECT_EQ(algos(f, c), bits({A::Ring, A::Tree})) << collectiveName(c);
    EXPECT_TRUE(forced(f, c));
  }
  for (C c : {C::AllToAll, C::Gather, C::Scatter, C::Send, C::Recv}) {
    EXPECT_EQ(algos(f, c), kAllAlgos) << collectiveName(c);
    EXPECT_FALSE(forced(f, c));
  }
  EXPECT_TRUE(f.allows(C::AllReduce, A::Tree));
  EXPECT_FALSE(f.allows(C::AllReduce, A::RecursiveDoubling));
}

TEST(AlgoEnv, CaretExcludes) {
  tuning::AlgoFilter f = tuning::parseAlgoFilter("^Tree", nullptr);
  EXPECT_EQ(algos(f, C::AllReduce), kAllAlgos & ~bits({A::Tree}));
  f = tuning::parseAlgoFilter("^ ring , tree ", nullptr);
  EXPECT_EQ(algos(f, C::Broadcast), kAllAlgos & ~bits({A::Ring, A::Tree}));
}

TEST(AlgoEnv, PerCollectiveLists) {
  tuning::AlgoFilter f = tuning::parseAlgoFilter("allreduce:tree,ring;broadcast:ring", nullptr);
  EXPECT_EQ(algos(f, C::AllReduce), bits({A::Tree, A::Ring}));
  EXPECT_EQ(algos(f, C::Broadcast), bits({A::Ring}));
  EXPECT_EQ(algos(f, C::AllGather), kAllAlgos);
  EXPECT_FALSE(forced(f, C::AllGather));
  EXPECT_TRUE(forced(f, C::Broadcast));
  EXPECT_NE(describeAlgoFilter(f).find("AllReduce: Ring,Tree/any"), std::string::npos)
      << describeAlgoFilter(f);
}

TEST(AlgoEnv, DefaultListThenOverrides) {
  tuning::AlgoFilter f = tuning::parseAlgoFilter("Ring;AllReduce:^ring;AllToAll:direct", nullptr);
  EXPECT_EQ(algos(f, C::ReduceScatter), bits({A::Ring}));
  EXPECT_EQ(algos(f, C::AllReduce), kAllAlgos & ~bits({A::Ring}));
  EXPECT_EQ(algos(f, C::AllToAll), bits({A::Direct}));
  EXPECT_TRUE(forced(f, C::AllToAll));
  // Only the first list may lack a prefix: a later one is ignored.
  f = tuning::parseAlgoFilter("allreduce:ring;tree", nullptr);
  EXPECT_EQ(algos(f, C::AllReduce), bits({A::Ring}));
  EXPECT_EQ(algos(f, C::Broadcast), kAllAlgos);
  // send, recv and sendrecv all name both ends: they must chunk alike.
  for (const char* v : {"sendrecv:LL", "send:LL", "recv:LL"}) {
    f = tuning::parseAlgoFilter(nullptr, v);
    EXPECT_EQ(protos(f, C::Send), bits({P::LL})) << v;
    EXPECT_EQ(protos(f, C::Recv), bits({P::LL})) << v;
  }
}

TEST(AlgoEnv, BraidNamesAndAliases) {
  struct Case {
    const char* name;
    A algo;
  } cases[] = {{"RecursiveDoubling", A::RecursiveDoubling}, {"rd", A::RecursiveDoubling},
               {"RecDoubling", A::RecursiveDoubling},       {"HalvingDoubling", A::HalvingDoubling},
               {"HD", A::HalvingDoubling},                  {"rabenseifner", A::HalvingDoubling},
               {"Direct", A::Direct},                       {"RING", A::Ring}};
  for (const Case& c : cases) EXPECT_EQ(algos(tuning::parseAlgoFilter(c.name, nullptr), C::AllReduce), bits({c.algo})) << c.name;
  // PAT: NCCL's logarithmic all-gather / reduce-scatter.
  EXPECT_EQ(algos(tuning::parseAlgoFilter("PAT", nullptr), C::AllGather),
            bits({A::RecursiveDoubling, A::HalvingDoubling}));
}

TEST(AlgoEnv, NcclOnlyAndUnknownNamesAreIgnored) {
  EXPECT_EQ(algos(tuning::parseAlgoFilter("NVLS,Ring,CollnetDirect", nullptr), C::AllReduce), bits({A::Ring}));
  EXPECT_EQ(algos(tuning::parseAlgoFilter("^NVLS,NVLSTree,CollnetChain", nullptr), C::AllReduce), kAllAlgos);
  EXPECT_EQ(algos(tuning::parseAlgoFilter("rnig,tree", nullptr), C::AllReduce), bits({A::Tree}));
  // Nothing braid has: an empty set, which the planner answers with its own choice.
  tuning::AlgoFilter f = tuning::parseAlgoFilter("CollnetDirect", nullptr);
  EXPECT_EQ(algos(f, C::AllReduce), 0);
  EXPECT_TRUE(forced(f, C::AllReduce));
  // An unknown collective prefix drops its segment.
  f = tuning::parseAlgoFilter("allreduc:tree", nullptr);
  EXPECT_EQ(algos(f, C::AllReduce), kAllAlgos);
  EXPECT_FALSE(forced(f, C::AllReduce));
}

TEST(AlgoEnv, ProtocolLists) {
  tuning::AlgoFilter f = tuning::parseAlgoFilter(nullptr, "LL");
  for (int c = 0; c < tuning::kNumCollectives; ++c) EXPECT_EQ(f.protos[c], bits({P::LL}));
  EXPECT_EQ(algos(f, C::AllReduce), kAllAlgos);
  f = tuning::parseAlgoFilter(nullptr, "^LL128");
  EXPECT_EQ(protos(f, C::Send), bits({P::LL, P::Simple}));
  f = tuning::parseAlgoFilter(nullptr, "LL,Simple;allreduce:^LL");
  EXPECT_EQ(protos(f, C::AllReduce), bits({P::LL128, P::Simple}));
  EXPECT_EQ(protos(f, C::Broadcast), bits({P::LL, P::Simple}));
  f = tuning::parseAlgoFilter(nullptr, "^LL128;allreduce:LL128");
  EXPECT_EQ(protos(f, C::AllReduce), bits({P::LL128}));
  EXPECT_EQ(protos(f, C::Reduce), bits({P::LL, P::Simple}));
  EXPECT_TRUE(f.allows(C::AllReduce, P::LL128));
  EXPECT_FALSE(f.allows(C::AllReduce, P::Simple));
}

TEST(AlgoEnv, ReadsTheEnvironment) {
  setenv("NCCL_ALGO", "allreduce:rd", 1);
  setenv("NCCL_PROTO", "simple", 1);
  tuning::AlgoFilter f = tuning::algoFilterFromEnv();
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  EXPECT_EQ(algos(f, C::AllReduce), bits({A::RecursiveDoubling}));
  EXPECT_EQ(protos(f, C::AllGather), bits({P::Simple}));
  f = tuning::algoFilterFromEnv();
  EXPECT_EQ(algos(f, C::AllReduce), kAllAlgos);
}

}  // namespace
}  // namespace braid
