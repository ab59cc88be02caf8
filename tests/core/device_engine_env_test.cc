// BRAID_DEVICE_ENGINE and BRAID_GRAPH_ENGINE (src/core/init.cc
// makeCommSettings): their defaults (plan kernels outside graphs, staged in
// graphs until captured plan kernels have run on a GPU), each word, and any
// other word refused with a message naming the variable, the value and the
// choices.
#include <gtest/gtest.h>

#include <string>

#include "common/scoped_env.h"
#include "core/init.h"
#include "engine/comm.h"

namespace braid {
namespace {

engine::CommSettings settingsWith(const char* name, const char* value, Result* r) {
  braidtest::ScopedEnv env({{std::string(name), std::string(value)}});
  engine::CommSettings s;
  *r = core::makeCommSettings(nullptr, &s);
  return s;
}

TEST(DeviceEngineEnv, DefaultsAreKernelsOutsideGraphsAndStagedInGraphs) {
  engine::CommSettings s;
  ASSERT_TRUE(core::makeCommSettings(nullptr, &s).ok());
  EXPECT_TRUE(s.deviceKernels);
  EXPECT_FALSE(s.graphKernels);
  EXPECT_FALSE(s.bridgedKernels);
}

TEST(DeviceEngineEnv, EachWordSetsItsEngine) {
  Result r;
  EXPECT_FALSE(settingsWith("BRAID_DEVICE_ENGINE", "staged", &r).deviceKernels);
  EXPECT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(settingsWith("BRAID_DEVICE_ENGINE", "kernels", &r).deviceKernels);
  EXPECT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(settingsWith("BRAID_GRAPH_ENGINE", "kernels", &r).graphKernels);
  EXPECT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(settingsWith("BRAID_GRAPH_ENGINE", "staged", &r).graphKernels);
  EXPECT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(settingsWith("BRAID_MULTIHOST_ENGINE", "kernels", &r).bridgedKernels);
  EXPECT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(settingsWith("BRAID_MULTIHOST_ENGINE", "staged", &r).bridgedKernels);
  EXPECT_TRUE(r.ok()) << r.message();
}

TEST(DeviceEngineEnv, OtherWordsAreRefusedWithTheChoices) {
  for (const char* name : {"BRAID_DEVICE_ENGINE", "BRAID_GRAPH_ENGINE", "BRAID_MULTIHOST_ENGINE"})
    for (const char* word : {"kernel", "Kernels", "graphs", "1"}) {
      Result r;
      (void)settingsWith(name, word, &r);
      EXPECT_EQ(r.code(), ncclInvalidArgument) << name << "=" << word;
      EXPECT_NE(r.message().find(std::string(name) + "=" + word), std::string::npos) << r.message();
      EXPECT_NE(r.message().find("kernels"), std::string::npos) << r.message();
      EXPECT_NE(r.message().find("staged"), std::string::npos) << r.message();
    }
}

}  // namespace
}  // namespace braid
