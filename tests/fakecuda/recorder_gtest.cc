// Linked into every fakecuda test program: a violation the recorder sees
// while a test runs fails that test (from whatever thread made the call:
// gtest's assertions are thread-safe), and one seen outside any test fails
// the program at the end.
#include <gtest/gtest.h>

#include "fakecuda.h"

namespace {

class RecorderEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    fakecuda::setViolationHook([](const fakecuda::Violation& v) {
      ADD_FAILURE() << "synchronising CUDA call " << v.call << " by " << v.caller
                    << " while tracked kernels were outstanding:\n" << v.outstanding << "called from:\n"
                    << v.backtrace;
    });
  }
  void TearDown() override {
    fakecuda::setViolationHook(nullptr);
    size_t unexpected = 0;
    for (const fakecuda::Violation& v : fakecuda::violations()) unexpected += v.expected ? 0 : 1;
    EXPECT_EQ(unexpected, 0u) << "synchronising CUDA calls while tracked kernels were outstanding (see the "
                                      "fakecuda: VIOLATION lines above)";
  }
};

// gtest owns registered environments.
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new RecorderEnvironment);

}  // namespace
