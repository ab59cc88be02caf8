// BRAID_WIRE_TYPE's words (src/core/wire_type.cc): each type by its short
// name and the 16-bit ones by their datatypes' names too; anything else
// refused with a message naming the value and the choices.
#include <gtest/gtest.h>

#include <string>

#include "common/scoped_env.h"
#include "core/wire_type.h"
#include "reduce/wire_format.h"

namespace braid {
namespace {

using reduce::WireType;

WireType parsed(const char* word) {
  braidtest::ScopedEnv env({{std::string("BRAID_WIRE_TYPE"), std::string(word)}});
  WireType w = WireType::Fixed64;
  const Result r = core::wireTypeFromEnv(&w);
  EXPECT_TRUE(r.ok()) << word << ": " << r.message();
  return w;
}

TEST(WireTypeEnv, ShortNamesAndDatatypeNames) {
  EXPECT_EQ(parsed("none"), WireType::None);
  EXPECT_EQ(parsed("bf16"), WireType::BFloat16);
  EXPECT_EQ(parsed("bfloat16"), WireType::BFloat16);
  EXPECT_EQ(parsed("fp16"), WireType::Float16);
  EXPECT_EQ(parsed("float16"), WireType::Float16);
  EXPECT_EQ(parsed("fp8e4m3"), WireType::Fp8E4M3);
  EXPECT_EQ(parsed("fp8e5m2"), WireType::Fp8E5M2);
}

TEST(WireTypeEnv, OtherWordsAreRefusedWithTheChoices) {
  for (const char* word : {"fp8", "BF16", "float32", "fixed64", " bf16"}) {
    braidtest::ScopedEnv env({{std::string("BRAID_WIRE_TYPE"), std::string(word)}});
    WireType w = WireType::None;
    const Result r = core::wireTypeFromEnv(&w);
    EXPECT_EQ(r.code(), ncclInvalidArgument) << word;
    EXPECT_NE(r.message().find(std::string("BRAID_WIRE_TYPE=") + word), std::string::npos) << r.message();
    EXPECT_NE(r.message().find("fp8e4m3"), std::string::npos) << r.message();
  }
}

}  // namespace
}  // namespace braid
