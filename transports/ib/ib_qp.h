// Bringing an RC queue pair from RESET to RTS, and registering memory through
// the registration cache, over the run-time loaded verbs.
#pragma once

#include <memory>

#include "transports/ib/ib_blob.h"
#include "transports/ib/ib_mr_cache.h"
#include "transports/ib/ib_verbs_loader.h"

namespace braid::ib {

// What this side contributes to the transitions.
struct QpLocal {
  uint8_t port = 1;
  int gidIndex = 0;
  uint8_t mtu = kMtu1024;  // the port's active MTU
  uint32_t psn = 0;        // 24 bits, this side's first send PSN
};

// Attribute sets of the three transitions; `mask` receives the fields set.
// Pure, so the choices (access, MTU, addressing, retry) are tested as data.
IbvQpAttr qpInitAttr(const QpLocal& local, int* mask);
IbvQpAttr qpRtrAttr(const QpLocal& local, const IbConnInfo& remote, int* mask);
IbvQpAttr qpRtsAttr(const QpLocal& local, int* mask);

// RESET -> INIT -> RTR -> RTS; an error names the transition that failed.
Result bringUpQp(const VerbsLibrary& lib, IbvQp* qp, const QpLocal& local,
                 const IbConnInfo& remote);

// MrRegistrar over a protection domain: what MrCache uses on real hardware.
class VerbsMrRegistrar : public MrRegistrar {
 public:
  VerbsMrRegistrar(std::shared_ptr<VerbsLibrary> lib, IbvPd* pd, int access)
      : lib_(std::move(lib)), pd_(pd), access_(access) {}
  Result registerRange(uintptr_t addr, size_t bytes, void** handle, MrKeys* keys) override;
  void deregister(void* handle) override;

 private:
  std::shared_ptr<VerbsLibrary> lib_;
  IbvPd* pd_;
  int access_;
};

}  // namespace braid::ib
