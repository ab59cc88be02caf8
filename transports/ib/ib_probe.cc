#include "transports/ib/ib_probe.h"

#include <algorithm>
#include <set>

#include "base/env.h"
#include "transports/ib/ib_sysfs.h"

namespace braid::ib {

IbProbeOptions ibProbeOptionsFromEnv() {
  IbProbeOptions o;
  o.hca = envString("NCCL_IB_HCA");
  o.gidIndex = envString("NCCL_IB_GID_INDEX");
  o.disabled = envBool("NCCL_IB_DISABLE", false);
  return o;
}

namespace {

IbProbeResult notUsable(std::string reason) {
  IbProbeResult r;
  r.reason = std::move(reason);
  return r;
}

}  // namespace

IbProbeResult probeIb(const IbProbeOptions& o) {
  if (o.disabled) return notUsable("NCCL_IB_DISABLE is set");
  HcaFilter filter;
  Result parsed = parseHcaFilter(o.hca, &filter);
  if (!parsed.ok()) return notUsable(parsed.message());
  int gidIndex = -1;
  parsed = parseGidIndex(o.gidIndex, &gidIndex);
  if (!parsed.ok()) return notUsable(parsed.message());

  const std::vector<PortDesc> all = scanSysfsPorts(o.sysRoot);
  if (all.empty()) return notUsable("no device under " + o.sysRoot + "/class/infiniband");
  std::vector<PortDesc> chosen = selectPorts(all, filter, false);
  if (chosen.empty())
    return notUsable(o.hca.empty() ? "no active port"
                                   : "no active port matches NCCL_IB_HCA=" + o.hca);

  std::shared_ptr<VerbsLibrary> lib;
  Result loaded = VerbsLibrary::open(o.soname.c_str(), &lib);
  if (!loaded.ok()) return notUsable(loaded.message());
  DeviceList devices;
  Result listed = DeviceList::get(lib, &devices);
  if (!listed.ok()) return notUsable(listed.message());
  std::set<std::string> names;
  for (int i = 0; i < devices.size(); ++i) names.insert(devices.name(i));
  // sysfs can list devices whose user-space provider is missing: verbs cannot open those.
  chosen.erase(std::remove_if(chosen.begin(), chosen.end(),
                              [&](const PortDesc& p) { return names.count(p.device) == 0; }),
               chosen.end());
  if (chosen.empty()) return notUsable("libibverbs sees none of the selected devices (provider missing?)");

  IbProbeResult r;
  r.usable = true;
  r.ports = std::move(chosen);
  r.gidIndex = gidIndex;
  r.lib = std::move(lib);
  return r;
}

}  // namespace braid::ib
