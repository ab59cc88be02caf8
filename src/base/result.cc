#include "base/result.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

namespace braid {

namespace {
std::string vformat(const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  return buf;
}
}  // namespace

Result fail(ncclResult_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  return Result(code, std::move(msg));
}

Result systemFail(const char* fmt, ...) {
  int err = errno;
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  msg += ": ";
  msg += strerror(err);
  return Result(ncclSystemError, std::move(msg));
}

Result currentExceptionResult(const char* where) noexcept {
  try {
    try {
      throw;
    } catch (const std::bad_alloc&) {
      return fail(ncclSystemError, "%s: out of memory (an allocation failed; is a count far larger than its buffer?)",
                  where);
    } catch (const std::exception& e) {
      return fail(ncclInternalError, "%s: internal error: %s", where, e.what());
    } catch (...) {
      return fail(ncclInternalError, "%s: internal error (an unknown exception)", where);
    }
  } catch (...) {
    return Result(ncclSystemError, std::string());  // describing it needed memory too
  }
}

}  // namespace braid
