#include "base/shared_library.h"

#include <dlfcn.h>

namespace braid {

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& o) noexcept {
  if (this != &o) {
    if (handle_) dlclose(handle_);
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

SharedLibrary::~SharedLibrary() {
  if (handle_) dlclose(handle_);
}

Result SharedLibrary::open(const char* soname, SharedLibrary* out, bool* absent) {
  if (absent) *absent = false;
  void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    if (absent) *absent = true;
    return fail(ncclSystemError, "cannot load %s: %s", soname, why ? why : "unknown error");
  }
  *out = SharedLibrary();
  out->handle_ = handle;
  return Result::success();
}

void* SharedLibrary::lookup(const char* symbol) const { return dlsym(handle_, symbol); }

}  // namespace braid
