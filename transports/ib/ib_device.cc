#include "transports/ib/ib_device.h"

#include <cstring>

namespace braid::ib {

Result IbDevice::open(std::shared_ptr<VerbsLibrary> lib, const PortDesc& port,
                      int gidIndexSetting, std::shared_ptr<IbDevice>* out) {
  std::shared_ptr<IbDevice> d(new IbDevice());
  d->lib_ = lib;
  d->name_ = port.device + ":" + std::to_string(port.port);
  if (port.port < 1 || port.port > 255)
    return fail(ncclInternalError, "ib: port %s out of range", d->name_.c_str());
  d->port_ = static_cast<uint8_t>(port.port);
  DeviceList devices;
  BRAID_TRY(DeviceList::get(lib, &devices));
  int found = -1;
  for (int i = 0; i < devices.size(); ++i)
    if (devices.name(i) == port.device) found = i;
  if (found < 0)
    return fail(ncclSystemError, "ib: libibverbs no longer lists %s", port.device.c_str());
  BRAID_TRY(openContext(lib, devices.at(found), &d->ctx_));
  BRAID_TRY(allocPd(lib, d->ctx_.get(), &d->pd_));

  IbvPortAttr attr;
  memset(&attr, 0, sizeof(attr));
  int rc = lib->api().queryPort(d->ctx_.get(), d->port_, &attr);
  if (rc != 0) return fail(ncclSystemError, "ibv_query_port(%s) failed: %s", d->name_.c_str(), strerror(rc));
  if (attr.state != kPortActive)
    return fail(ncclSystemError, "ib: port %s is not active (state %d)", d->name_.c_str(), attr.state);
  d->lid_ = attr.lid;
  d->mtu_ = static_cast<uint8_t>(attr.activeMtu >= kMtu256 && attr.activeMtu <= kMtu4096
                                     ? attr.activeMtu
                                     : kMtu1024);
  d->linkLayer_ = attr.linkLayer == kLinkEthernet ? kLinkEthernet : kLinkInfiniBand;

  BRAID_TRY(chooseGidIndex(port, gidIndexSetting, &d->gidIndex_));
  rc = lib->api().queryGid(d->ctx_.get(), d->port_, d->gidIndex_, &d->gid_);
  if (rc != 0)
    return fail(ncclSystemError, "ibv_query_gid(%s, index %d) failed: %s", d->name_.c_str(),
                d->gidIndex_, strerror(rc));
  *out = std::move(d);
  return Result::success();
}

}  // namespace braid::ib
