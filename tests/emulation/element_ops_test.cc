// kernels/executor/element_ops.h as a block runs it: 16-byte vectors per
// thread where every pointer can reach a 16-byte boundary after the same
// number of leading elements, single elements elsewhere. Against the plain
// element-by-element loop, for every start offset within a vector, counts
// around the vector and thread boundaries, 1-4 threads, in place and not,
// and element sizes 1 to 8 bytes: the same bits, every element written once.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/executor/element_ops.h"
#include "tests/emulation/thread_block.h"

namespace braid {
namespace {

template <class T>
T valueAt(uint64_t i, uint32_t salt) {
  return T((i * 2654435761u + salt) % 97);
}

// Runs body(group) on `threads` threads of one emulated block.
template <class Body>
void onBlock(uint32_t threads, Body body) {
  emulation::BlockShared block(threads);
  std::vector<std::thread> workers;
  for (uint32_t t = 0; t < threads; ++t) workers.emplace_back([&, t] { body(emulation::ThreadBlockGroup(&block, t)); });
  for (auto& w : workers) w.join();
}

template <class T>
void checkType() {
  const auto add = [](T a, T b) { return T(a + b); };
  const auto twice = [](T a) { return T(a * 2); };
  for (uint32_t threads : {1u, 2u, 3u, 4u})
    for (uint64_t n : {0u, 1u, 7u, 16u, 17u, 63u, 64u, 100u, 257u})
      for (uint32_t off = 0; off < 16 / sizeof(T) + 1; ++off)
        for (uint32_t skew : {0u, 1u})  // the sources' misalignment differs from dst's
          for (bool inPlace : {false, true}) {
            SCOPED_TRACE(testing::Message() << sizeof(T) << "-byte elements, " << threads << " threads, n=" << n
                                            << " offset " << off << " skew " << skew << (inPlace ? " in place" : ""));
            std::vector<T> a(n + 40), b(n + 40), d(n + 40, T(0)), want(n + 40, T(0));
            for (uint64_t i = 0; i < a.size(); ++i) a[i] = valueAt<T>(i, 1), b[i] = valueAt<T>(i, 2);
            T* dst = inPlace ? a.data() + off : d.data() + off;
            const T* src = a.data() + off;
            const T* other = b.data() + off + skew;
            for (uint64_t i = 0; i < n; ++i) want[i] = add(src[i], other[i]);
            onBlock(threads, [&](const auto& g) { executor::forEach2(g, dst, src, other, n, add); });
            ASSERT_EQ(memcmp(dst, want.data(), n * sizeof(T)), 0);
            // One source: a scaling, and the copy.
            std::vector<T> in(n + 40), out(n + 40, T(0));
            for (uint64_t i = 0; i < in.size(); ++i) in[i] = valueAt<T>(i, 3);
            T* to = inPlace ? in.data() + off : out.data() + off + skew;
            const T* from = in.data() + off;
            std::vector<T> scaled(n);
            for (uint64_t i = 0; i < n; ++i) scaled[i] = twice(from[i]);
            onBlock(threads, [&](const auto& g) { executor::forEach1(g, to, from, n, twice); });
            ASSERT_EQ(memcmp(to, scaled.data(), n * sizeof(T)), 0);
            const std::vector<T> copied(to, to + n);
            std::vector<T> sink(n + 40, T(0));
            onBlock(threads, [&](const auto& g) { executor::copyElems(g, sink.data() + off, to, n); });
            ASSERT_EQ(memcmp(sink.data() + off, copied.data(), n * sizeof(T)), 0);
            for (uint64_t i = 0; i < off; ++i) ASSERT_EQ(sink[i], T(0)) << "written before the range";
            for (uint64_t i = off + n; i < sink.size(); ++i) ASSERT_EQ(sink[i], T(0)) << "written after the range";
          }
}

TEST(ElementOps, VectorPathMatchesElementByElement) {
  checkType<uint8_t>();
  checkType<uint16_t>();
  checkType<float>();
  checkType<double>();
}

}  // namespace
}  // namespace braid
