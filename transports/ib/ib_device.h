// One opened port: the verbs context and protection domain every connection
// through that port shares, and the addressing a queue pair on it announces.
#pragma once

#include <memory>
#include <string>

#include "transports/ib/ib_device_select.h"
#include "transports/ib/ib_verbs_loader.h"

namespace braid::ib {

class IbDevice {
 public:
  // Opens `port.device` through `lib`, queries the port (LID, active MTU, link
  // layer) and the GID chosen by chooseGidIndex(port, gidIndexSetting).
  static Result open(std::shared_ptr<VerbsLibrary> lib, const PortDesc& port, int gidIndexSetting,
                     std::shared_ptr<IbDevice>* out);

  const std::shared_ptr<VerbsLibrary>& lib() const { return lib_; }
  IbvContext* context() const { return ctx_.get(); }
  IbvPd* pd() const { return pd_.get(); }
  uint8_t port() const { return port_; }
  uint16_t lid() const { return lid_; }
  uint8_t mtu() const { return mtu_; }
  uint8_t linkLayer() const { return linkLayer_; }
  int gidIndex() const { return gidIndex_; }
  const uint8_t* gid() const { return gid_.raw; }
  // "mlx5_0:1", for messages.
  const std::string& name() const { return name_; }

 private:
  IbDevice() = default;
  std::shared_ptr<VerbsLibrary> lib_;
  Context ctx_;          // declared before pd_: destroyed after it
  ProtectionDomain pd_;
  uint8_t port_ = 1;
  uint16_t lid_ = 0;
  uint8_t mtu_ = kMtu1024;
  uint8_t linkLayer_ = kLinkInfiniBand;
  int gidIndex_ = 0;
  IbvGid gid_{};
  std::string name_;
};

}  // namespace braid::ib
