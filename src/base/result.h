// Internal error carrier: a result code plus a message that says what went wrong
// and what to do. The API layer turns it into ncclResult_t and records the
// message for ncclGetLastError.
#pragma once

#include <nccl.h>

#include <string>
#include <utility>

namespace braid {

class [[nodiscard]] Result {
 public:
  Result() = default;
  Result(ncclResult_t code, std::string message) : code_(code), message_(std::move(message)) {}

  static Result success() { return Result(); }

  bool ok() const { return code_ == ncclSuccess; }
  ncclResult_t code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes context ("while connecting to rank 3: ...") as the error travels up.
  Result& context(const std::string& what) {
    if (!ok()) message_ = what + ": " + message_;
    return *this;
  }

 private:
  ncclResult_t code_ = ncclSuccess;
  std::string message_;
};

// printf-style constructor for failures.
Result fail(ncclResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// A system call failed: message includes strerror(errno) captured at the call.
Result systemFail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// The exception being handled as a Result (call it in a catch block): a
// std::bad_alloc is ncclSystemError, anything else ncclInternalError with its
// text, each prefixed by `where`. Exceptions never cross the C API, nor end a
// thread (which would terminate the process): they become errors here.
Result currentExceptionResult(const char* where) noexcept;

// Runs f() (returning Result) and turns an exception it throws into a Result.
template <class F>
Result guarded(const char* where, F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return currentExceptionResult(where);
  }
}

}  // namespace braid

#define BRAID_TRY(expr)                         \
  do {                                          \
    ::braid::Result braid_try_result_ = (expr); \
    if (!braid_try_result_.ok()) return braid_try_result_; \
  } while (0)
