// A library loaded at run time (hwloc, libibverbs): opened RTLD_LOCAL so its
// symbols never satisfy another library's lookups, closed once by its owner.
#pragma once

#include <string>
#include <utility>

#include "base/result.h"

namespace braid {

class SharedLibrary {
 public:
  SharedLibrary() = default;
  SharedLibrary(SharedLibrary&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  SharedLibrary& operator=(SharedLibrary&& o) noexcept;
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  ~SharedLibrary();

  // Loads `soname`; `absent` (may be null) tells "not installed" apart from
  // "installed but failed" once the result is an error.
  static Result open(const char* soname, SharedLibrary* out, bool* absent = nullptr);

  // Looks `symbol` up into *fn; the first symbol missing is kept in *missing,
  // so a caller resolves its whole table and reports once.
  template <class Fn>
  void resolve(const char* symbol, Fn* fn, std::string* missing) const {
    *fn = reinterpret_cast<Fn>(lookup(symbol));
    if (!*fn && missing->empty()) missing->assign(symbol);
  }

 private:
  void* lookup(const char* symbol) const;
  void* handle_ = nullptr;
};

}  // namespace braid
