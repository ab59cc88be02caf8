#include "topology/hwloc_loader.h"

#include <mutex>
#include <utility>

#include "base/log.h"

namespace braid::topology {

namespace {

// hwloc's rule: same major of the API version means same ABI.
constexpr unsigned kApiMajor = HWLOC_API_VERSION >> 16;
static_assert(kApiMajor == 2, "kHwlocSoname names hwloc 2.x (soname 15)");

std::string apiVersionText(unsigned v) {
  return std::to_string(v >> 16) + "." + std::to_string((v >> 8) & 0xff);
}

struct ProcessState {
  std::mutex mu;
  std::vector<std::string> sonames{kHwlocSoname, kHwlocFallbackSoname};
  bool tried = false;
  HwlocLoad load;
};

ProcessState& state() {
  static ProcessState s;
  return s;
}

HwlocLoad tryLoad(const std::vector<std::string>& sonames) {
  HwlocLoad result;
  result.absent = true;
  for (const std::string& name : sonames) {
    bool absent = false;
    std::shared_ptr<HwlocLibrary> lib;
    Result r = HwlocLibrary::open(name.c_str(), &lib, &absent);
    if (r.ok()) return HwlocLoad{std::move(lib), false, ""};
    // Report the first library found but unusable, else the first attempt.
    if (!absent && result.absent) {
      result.absent = false;
      result.why = r.message();
    } else if (result.why.empty()) {
      result.why = r.message();
    }
  }
  return result;
}

void logFailure(const HwlocLoad& load) {
  // A machine without hwloc is normal (sysfs has the same facts); one with an
  // hwloc braid cannot use is worth a warning.
  if (load.absent)
    BRAID_INFO(kLogInit, "topology: hwloc is not installed (%s); reading sysfs instead",
               load.why.c_str());
  else
    BRAID_WARN("topology: %s; reading sysfs instead", load.why.c_str());
}

}  // namespace

Result HwlocLibrary::open(const char* soname, std::shared_ptr<HwlocLibrary>* out, bool* absent) {
  SharedLibrary lib;
  BRAID_TRY(SharedLibrary::open(soname, &lib, absent));
  HwlocApi api{};
  std::string missing;
  lib.resolve("hwloc_get_api_version", &api.getApiVersion, &missing);
  lib.resolve("hwloc_topology_init", &api.topologyInit, &missing);
  lib.resolve("hwloc_topology_destroy", &api.topologyDestroy, &missing);
  lib.resolve("hwloc_topology_load", &api.topologyLoad, &missing);
  lib.resolve("hwloc_topology_set_flags", &api.topologySetFlags, &missing);
  lib.resolve("hwloc_topology_set_xmlbuffer", &api.topologySetXmlbuffer, &missing);
  lib.resolve("hwloc_topology_set_io_types_filter", &api.topologySetIoTypesFilter, &missing);
  lib.resolve("hwloc_get_type_depth", &api.getTypeDepth, &missing);
  lib.resolve("hwloc_get_obj_by_depth", &api.getObjByDepth, &missing);
  lib.resolve("hwloc_distances_get_by_depth", &api.distancesGetByDepth, &missing);
  lib.resolve("hwloc_distances_release", &api.distancesRelease, &missing);
  lib.resolve("hwloc_bitmap_first", &api.bitmapFirst, &missing);
  lib.resolve("hwloc_bitmap_next", &api.bitmapNext, &missing);
  lib.resolve("hwloc_bitmap_weight", &api.bitmapWeight, &missing);
  if (!missing.empty()) {
    return fail(ncclSystemError, "%s lacks %s: not a usable hwloc", soname, missing.c_str());
  }
  // The object structs braid reads are laid out as the headers of this major say.
  const unsigned version = api.getApiVersion();
  if ((version >> 16) != kApiMajor) {
    return fail(ncclSystemError, "%s has hwloc API %s, braid was built for %s: not used", soname,
                apiVersionText(version).c_str(), apiVersionText(HWLOC_API_VERSION).c_str());
  }
  out->reset(new HwlocLibrary(std::move(lib), api, soname));
  return Result::success();
}


hwloc_obj_t HwlocLibrary::rootObj(hwloc_topology_t topo) const {
  return api_.getObjByDepth(topo, 0, 0);
}

hwloc_obj_t HwlocLibrary::nextObjByType(hwloc_topology_t topo, hwloc_obj_type_t type,
                                        hwloc_obj_t prev) const {
  const int depth = api_.getTypeDepth(topo, type);
  if (depth == HWLOC_TYPE_DEPTH_UNKNOWN || depth == HWLOC_TYPE_DEPTH_MULTIPLE) return nullptr;
  if (!prev) return api_.getObjByDepth(topo, depth, 0);
  return prev->depth == depth ? prev->next_cousin : nullptr;
}

int HwlocLibrary::distancesGetByType(hwloc_topology_t topo, hwloc_obj_type_t type, unsigned* nr,
                                     hwloc_distances_s** distances, unsigned long kind,
                                     unsigned long flags) const {
  const int depth = api_.getTypeDepth(topo, type);
  if (depth == HWLOC_TYPE_DEPTH_UNKNOWN || depth == HWLOC_TYPE_DEPTH_MULTIPLE) {
    *nr = 0;  // no objects of that type, so no matrix of them
    return 0;
  }
  return api_.distancesGetByDepth(topo, depth, nr, distances, kind, flags);
}

HwlocLoad processHwloc() {
  ProcessState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.tried) {
    s.load = tryLoad(s.sonames);
    s.tried = true;
    if (!s.load.lib) logFailure(s.load);
  }
  return s.load;
}

void setHwlocSonamesForTesting(const std::vector<std::string>& sonames) {
  ProcessState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.sonames = sonames.empty() ? std::vector<std::string>{kHwlocSoname, kHwlocFallbackSoname}
                              : sonames;
  s.tried = false;
  s.load = HwlocLoad{};
}

}  // namespace braid::topology
