// Which discovery backend runs: hwloc when this build has it and libhwloc loads
// at run time, sysfs otherwise, and BRAID_TOPO to force one.
#include <utility>

#include "base/env.h"
#include "topology/topology.h"
#ifdef BRAID_HAVE_HWLOC
#include "topology/hwloc_discovery.h"
#include "topology/hwloc_loader.h"
#endif

namespace braid::topology {

namespace {

constexpr const char* kRealSysfs = "/sys";

#ifdef BRAID_HAVE_HWLOC
// hwloc first; if it cannot load, sysfs, with hwloc's reason as a warning.
Result discoverWithHwloc(const std::string& sysRoot, Topology* out) {
  Topology t;
  Result r = discoverTopologyHwloc(sysRoot, &t);
  if (r.ok()) {
    *out = std::move(t);
    return r;
  }
  BRAID_TRY(discoverTopology(sysRoot, out));
  out->warnings.insert(out->warnings.begin(), r.message() + "; read from sysfs instead");
  return Result::success();
}
#endif

}  // namespace

const char* backendName(Backend backend) {
  return backend == Backend::kHwloc ? "hwloc" : "sysfs";
}

bool hwlocBuiltIn() {
#ifdef BRAID_HAVE_HWLOC
  return true;
#else
  return false;
#endif
}

bool hwlocAvailable(std::string* why) {
#ifdef BRAID_HAVE_HWLOC
  HwlocLoad load = processHwloc();
  if (why) *why = load.lib ? "" : load.why;
  return load.lib != nullptr;
#else
  if (why) *why = "this build of braid has no hwloc";
  return false;
#endif
}

Backend chooseBackend(const std::string& request, std::string* warning) {
  warning->clear();
  if (request == "sysfs") return Backend::kSysfs;  // without even looking for hwloc
  std::string why;
  const Backend preferred = hwlocAvailable(&why) ? Backend::kHwloc : Backend::kSysfs;
  if (request.empty()) return preferred;
  if (request == "hwloc") {
    if (preferred == Backend::kHwloc) return Backend::kHwloc;
    if (!hwlocBuiltIn())
      *warning = "BRAID_TOPO=hwloc, but this build of braid has no hwloc (configure with "
                 "libhwloc-dev installed, BRAID_HWLOC=ON); using sysfs";
    else
      *warning = "BRAID_TOPO=hwloc, but " + why + "; using sysfs";
    return Backend::kSysfs;
  }
  *warning = "BRAID_TOPO=" + request + " is neither sysfs nor hwloc; using " +
             backendName(preferred);
  return preferred;
}

Result discoverMachine(const std::string& sysRoot, Topology* out) {
  const std::string request = envString("BRAID_TOPO");
  std::string warning;
  Backend backend = chooseBackend(request, &warning);
  if (backend == Backend::kHwloc && sysRoot != kRealSysfs) {
    // hwloc would describe the running machine, not the tree we were pointed at.
    if (request == "hwloc")
      warning = "BRAID_TOPO=hwloc ignored: hwloc reads the running machine, not " + sysRoot +
                "; using sysfs";
    backend = Backend::kSysfs;
  }
#ifdef BRAID_HAVE_HWLOC
  if (backend == Backend::kHwloc) BRAID_TRY(discoverWithHwloc(sysRoot, out));
#endif
  if (backend == Backend::kSysfs) BRAID_TRY(discoverTopology(sysRoot, out));
  if (!warning.empty()) out->warnings.insert(out->warnings.begin(), warning);
  return Result::success();
}

}  // namespace braid::topology
