// libibverbs loaded at run time (dlopen), so braid runs where rdma-core is absent,
// plus owning wrappers for every verbs object braid creates.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "base/result.h"
#include "base/shared_library.h"
#include "transports/ib/ib_verbs_abi.h"

namespace braid::ib {

constexpr const char* kVerbsSoname = "libibverbs.so.1";

// The exported entry points braid uses. Post/poll are not exported (they are
// inline in verbs.h): see postSend/postRecv/pollCq below.
struct VerbsApi {
  IbvDevice** (*getDeviceList)(int* num);
  void (*freeDeviceList)(IbvDevice** list);
  const char* (*getDeviceName)(IbvDevice* dev);
  IbvContext* (*openDevice)(IbvDevice* dev);
  int (*closeDevice)(IbvContext* ctx);
  int (*queryDevice)(IbvContext* ctx, IbvDeviceAttr* attr);
  int (*queryPort)(IbvContext* ctx, uint8_t port, IbvPortAttr* attr);
  int (*queryGid)(IbvContext* ctx, uint8_t port, int index, IbvGid* gid);
  IbvPd* (*allocPd)(IbvContext* ctx);
  int (*deallocPd)(IbvPd* pd);
  IbvMr* (*regMr)(IbvPd* pd, void* addr, size_t length, int access);
  int (*deregMr)(IbvMr* mr);
  IbvCq* (*createCq)(IbvContext* ctx, int cqe, void* cqContext, IbvCompChannel* channel,
                     int compVector);
  int (*destroyCq)(IbvCq* cq);
  IbvQp* (*createQp)(IbvPd* pd, IbvQpInitAttr* attr);
  int (*destroyQp)(IbvQp* qp);
  int (*modifyQp)(IbvQp* qp, IbvQpAttr* attr, int mask);
};

// Owns the dlopen handle. Every verbs object must be destroyed before it.
class VerbsLibrary {
 public:
  // Loads `soname` and resolves every VerbsApi entry. A missing library or
  // symbol is ncclSystemError with dlerror()'s text; nothing stays loaded.
  static Result open(const char* soname, std::shared_ptr<VerbsLibrary>* out);
  VerbsLibrary(const VerbsLibrary&) = delete;
  VerbsLibrary& operator=(const VerbsLibrary&) = delete;
  const VerbsApi& api() const { return api_; }

 private:
  VerbsLibrary(SharedLibrary lib, const VerbsApi& api) : lib_(std::move(lib)), api_(api) {}
  SharedLibrary lib_;
  VerbsApi api_;
};

// Move-only owner of one verbs object: destroys it through the library it
// came from, and keeps that library loaded until then.
template <class T>
class VerbsObject {
 public:
  using Destroy = int (*)(T*);
  VerbsObject() = default;
  VerbsObject(std::shared_ptr<VerbsLibrary> lib, T* p, Destroy destroy)
      : lib_(std::move(lib)), p_(p), destroy_(destroy) {}
  VerbsObject(VerbsObject&& o) noexcept { *this = std::move(o); }
  VerbsObject& operator=(VerbsObject&& o) noexcept {
    if (this != &o) {
      reset();
      lib_ = std::move(o.lib_);
      p_ = std::exchange(o.p_, nullptr);
      destroy_ = o.destroy_;
    }
    return *this;
  }
  ~VerbsObject() { reset(); }
  void reset() {
    if (p_) destroy_(p_);
    p_ = nullptr;
    lib_.reset();
  }
  T* get() const { return p_; }
  // Gives up ownership (the caller destroys it through the library).
  T* release() {
    lib_.reset();
    return std::exchange(p_, nullptr);
  }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  std::shared_ptr<VerbsLibrary> lib_;
  T* p_ = nullptr;
  Destroy destroy_ = nullptr;
};

using Context = VerbsObject<IbvContext>;
using ProtectionDomain = VerbsObject<IbvPd>;
using MemoryRegion = VerbsObject<IbvMr>;
using CompletionQueue = VerbsObject<IbvCq>;
using QueuePair = VerbsObject<IbvQp>;

// The device list, freed on destruction. A kernel without RDMA support gives
// an empty list, not an error.
class DeviceList {
 public:
  static Result get(std::shared_ptr<VerbsLibrary> lib, DeviceList* out);
  DeviceList() = default;
  DeviceList(DeviceList&& o) noexcept { *this = std::move(o); }
  DeviceList& operator=(DeviceList&& o) noexcept;
  ~DeviceList();
  int size() const { return n_; }
  IbvDevice* at(int i) const { return list_[i]; }
  std::string name(int i) const;

 private:
  std::shared_ptr<VerbsLibrary> lib_;
  IbvDevice** list_ = nullptr;
  int n_ = 0;
};

// Creation helpers: a null from libibverbs becomes a Result naming the call.
Result openContext(const std::shared_ptr<VerbsLibrary>& lib, IbvDevice* dev, Context* out);
Result allocPd(const std::shared_ptr<VerbsLibrary>& lib, IbvContext* ctx, ProtectionDomain* out);
Result regMr(const std::shared_ptr<VerbsLibrary>& lib, IbvPd* pd, void* addr, size_t bytes,
             int access, MemoryRegion* out);
Result createCq(const std::shared_ptr<VerbsLibrary>& lib, IbvContext* ctx, int entries,
                CompletionQueue* out);
Result createQp(const std::shared_ptr<VerbsLibrary>& lib, IbvPd* pd, IbvQpInitAttr* attr,
                QueuePair* out);

// The data-path calls verbs.h inlines, made through the context's op table.
int postSend(IbvQp* qp, IbvSendWr* wr, IbvSendWr** bad);
int postRecv(IbvQp* qp, IbvRecvWr* wr, IbvRecvWr** bad);
int pollCq(IbvCq* cq, int n, IbvWc* wc);

}  // namespace braid::ib
