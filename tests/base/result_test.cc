// src/base/result: an exception never ends a thread or crosses the C API; it
// becomes a Result that says what happened and where.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include "base/result.h"

namespace braid {
namespace {

TEST(Guarded, PassesAResultThrough) {
  EXPECT_TRUE(guarded("x", [] { return Result::success(); }).ok());
  const Result r = guarded("x", [] { return fail(ncclRemoteError, "rank 2 left"); });
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_EQ(r.message(), "rank 2 left");
}

TEST(Guarded, BadAllocIsASystemError) {
  const Result r = guarded("planning the group", []() -> Result { throw std::bad_alloc(); });
  EXPECT_EQ(r.code(), ncclSystemError);
  EXPECT_EQ(r.message().rfind("planning the group: out of memory", 0), 0u) << r.message();
}

TEST(Guarded, OtherExceptionsAreInternalErrorsWithTheirText) {
  Result r = guarded("connecting", []() -> Result { throw std::out_of_range("map::at"); });
  EXPECT_EQ(r.code(), ncclInternalError);
  EXPECT_EQ(r.message(), "connecting: internal error: map::at");
  r = guarded("connecting", []() -> Result { throw "a string"; });
  EXPECT_EQ(r.code(), ncclInternalError);
  EXPECT_EQ(r.message(), "connecting: internal error (an unknown exception)");
}

// What the library's own threads rely on: a throwing body would otherwise
// call std::terminate.
TEST(Guarded, KeepsAThreadAlive) {
  Result r;
  std::thread t([&] { r = guarded("init thread", []() -> Result { throw std::runtime_error("boom"); }); });
  t.join();
  EXPECT_EQ(r.message(), "init thread: internal error: boom");
}

}  // namespace
}  // namespace braid
