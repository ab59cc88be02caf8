#include "transports/ib/ib_verbs_loader.h"

#include <cerrno>

namespace braid::ib {

namespace {

using PostSendFn = int (*)(IbvQp*, IbvSendWr*, IbvSendWr**);
using PostRecvFn = int (*)(IbvQp*, IbvRecvWr*, IbvRecvWr**);
using PollCqFn = int (*)(IbvCq*, int, IbvWc*);

}  // namespace

Result VerbsLibrary::open(const char* soname, std::shared_ptr<VerbsLibrary>* out) {
  SharedLibrary lib;
  BRAID_TRY(SharedLibrary::open(soname, &lib, nullptr));
  VerbsApi api{};
  std::string missing;
  lib.resolve("ibv_get_device_list", &api.getDeviceList, &missing);
  lib.resolve("ibv_free_device_list", &api.freeDeviceList, &missing);
  lib.resolve("ibv_get_device_name", &api.getDeviceName, &missing);
  lib.resolve("ibv_open_device", &api.openDevice, &missing);
  lib.resolve("ibv_close_device", &api.closeDevice, &missing);
  lib.resolve("ibv_query_device", &api.queryDevice, &missing);
  lib.resolve("ibv_query_port", &api.queryPort, &missing);
  lib.resolve("ibv_query_gid", &api.queryGid, &missing);
  lib.resolve("ibv_alloc_pd", &api.allocPd, &missing);
  lib.resolve("ibv_dealloc_pd", &api.deallocPd, &missing);
  lib.resolve("ibv_reg_mr", &api.regMr, &missing);
  lib.resolve("ibv_dereg_mr", &api.deregMr, &missing);
  lib.resolve("ibv_create_cq", &api.createCq, &missing);
  lib.resolve("ibv_destroy_cq", &api.destroyCq, &missing);
  lib.resolve("ibv_create_qp", &api.createQp, &missing);
  lib.resolve("ibv_destroy_qp", &api.destroyQp, &missing);
  lib.resolve("ibv_modify_qp", &api.modifyQp, &missing);
  if (!missing.empty()) {
    return fail(ncclSystemError, "%s lacks %s: not a usable libibverbs", soname, missing.c_str());
  }
  out->reset(new VerbsLibrary(std::move(lib), api));
  return Result::success();
}


DeviceList& DeviceList::operator=(DeviceList&& o) noexcept {
  if (this != &o) {
    if (list_) lib_->api().freeDeviceList(list_);
    lib_ = std::move(o.lib_);
    list_ = std::exchange(o.list_, nullptr);
    n_ = std::exchange(o.n_, 0);
  }
  return *this;
}

DeviceList::~DeviceList() {
  if (list_) lib_->api().freeDeviceList(list_);
}

Result DeviceList::get(std::shared_ptr<VerbsLibrary> lib, DeviceList* out) {
  int n = 0;
  errno = 0;
  IbvDevice** list = lib->api().getDeviceList(&n);
  // ENOSYS: the kernel has no RDMA support at all, which is simply no device.
  if (!list && errno != ENOSYS) return systemFail("ibv_get_device_list failed");
  DeviceList d;
  d.lib_ = std::move(lib);
  d.list_ = list;
  d.n_ = list && n > 0 ? n : 0;
  *out = std::move(d);
  return Result::success();
}

std::string DeviceList::name(int i) const {
  const char* n = lib_->api().getDeviceName(list_[i]);
  return n ? n : "";
}

Result openContext(const std::shared_ptr<VerbsLibrary>& lib, IbvDevice* dev, Context* out) {
  IbvContext* ctx = lib->api().openDevice(dev);
  if (!ctx) return systemFail("ibv_open_device(%s) failed", lib->api().getDeviceName(dev));
  *out = Context(lib, ctx, lib->api().closeDevice);
  return Result::success();
}

Result allocPd(const std::shared_ptr<VerbsLibrary>& lib, IbvContext* ctx, ProtectionDomain* out) {
  IbvPd* pd = lib->api().allocPd(ctx);
  if (!pd) return systemFail("ibv_alloc_pd failed");
  *out = ProtectionDomain(lib, pd, lib->api().deallocPd);
  return Result::success();
}

Result regMr(const std::shared_ptr<VerbsLibrary>& lib, IbvPd* pd, void* addr, size_t bytes,
             int access, MemoryRegion* out) {
  IbvMr* mr = lib->api().regMr(pd, addr, bytes, access);
  if (!mr)
    return systemFail("ibv_reg_mr of %zu bytes at %p failed (check ulimit -l)", bytes, addr);
  *out = MemoryRegion(lib, mr, lib->api().deregMr);
  return Result::success();
}

Result createCq(const std::shared_ptr<VerbsLibrary>& lib, IbvContext* ctx, int entries,
                CompletionQueue* out) {
  IbvCq* cq = lib->api().createCq(ctx, entries, nullptr, nullptr, 0);
  if (!cq) return systemFail("ibv_create_cq with %d entries failed", entries);
  *out = CompletionQueue(lib, cq, lib->api().destroyCq);
  return Result::success();
}

Result createQp(const std::shared_ptr<VerbsLibrary>& lib, IbvPd* pd, IbvQpInitAttr* attr,
                QueuePair* out) {
  IbvQp* qp = lib->api().createQp(pd, attr);
  if (!qp) return systemFail("ibv_create_qp failed");
  *out = QueuePair(lib, qp, lib->api().destroyQp);
  return Result::success();
}

int postSend(IbvQp* qp, IbvSendWr* wr, IbvSendWr** bad) {
  return reinterpret_cast<PostSendFn>(qp->context->ops[kOpsPostSend])(qp, wr, bad);
}

int postRecv(IbvQp* qp, IbvRecvWr* wr, IbvRecvWr** bad) {
  return reinterpret_cast<PostRecvFn>(qp->context->ops[kOpsPostRecv])(qp, wr, bad);
}

int pollCq(IbvCq* cq, int n, IbvWc* wc) {
  return reinterpret_cast<PollCqFn>(cq->context->ops[kOpsPollCq])(cq, n, wc);
}

}  // namespace braid::ib
