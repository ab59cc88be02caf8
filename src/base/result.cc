#include "base/result.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

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

}  // namespace braid
