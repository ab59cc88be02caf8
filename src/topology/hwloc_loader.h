// libhwloc loaded at run time (dlopen), so that a libbraid built with hwloc's
// headers also runs where hwloc is not installed. Compiled only with
// BRAID_HAVE_HWLOC (hwloc.h gives the types and the ABI this build expects).
#pragma once

#include <hwloc.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/shared_library.h"

namespace braid::topology {

// hwloc 2.x is soname 15; a bare libhwloc.so (a -dev install only) is tried
// next and accepted only when its ABI major is the header's.
constexpr const char* kHwlocSoname = "libhwloc.so.15";
constexpr const char* kHwlocFallbackSoname = "libhwloc.so";

// The exported entry points braid uses. The helpers hwloc.h inlines (object
// iteration, root, distances by type) call exported functions, so they are
// rebuilt over these in HwlocLibrary below rather than called.
struct HwlocApi {
  unsigned (*getApiVersion)();
  int (*topologyInit)(hwloc_topology_t* topo);
  void (*topologyDestroy)(hwloc_topology_t topo);
  int (*topologyLoad)(hwloc_topology_t topo);
  int (*topologySetFlags)(hwloc_topology_t topo, unsigned long flags);
  int (*topologySetXmlbuffer)(hwloc_topology_t topo, const char* buffer, int size);
  int (*topologySetIoTypesFilter)(hwloc_topology_t topo, enum hwloc_type_filter_e filter);
  int (*getTypeDepth)(hwloc_topology_t topo, hwloc_obj_type_t type);
  hwloc_obj_t (*getObjByDepth)(hwloc_topology_t topo, int depth, unsigned idx);
  int (*distancesGetByDepth)(hwloc_topology_t topo, int depth, unsigned* nr,
                             hwloc_distances_s** distances, unsigned long kind,
                             unsigned long flags);
  void (*distancesRelease)(hwloc_topology_t topo, hwloc_distances_s* distances);
  int (*bitmapFirst)(hwloc_const_bitmap_t set);
  int (*bitmapNext)(hwloc_const_bitmap_t set, int prev);
  int (*bitmapWeight)(hwloc_const_bitmap_t set);
};

// Owns the dlopen handle. Every hwloc topology must be destroyed before it.
class HwlocLibrary {
 public:
  // Loads `soname`, resolves every HwlocApi entry and checks that the
  // library's API major is the one braid was compiled against. A missing
  // library is ncclSystemError with dlerror()'s text and sets *absent; a
  // missing symbol or another ABI is ncclSystemError too. Nothing stays loaded.
  static Result open(const char* soname, std::shared_ptr<HwlocLibrary>* out,
                     bool* absent = nullptr);
  HwlocLibrary(const HwlocLibrary&) = delete;
  HwlocLibrary& operator=(const HwlocLibrary&) = delete;
  const HwlocApi& api() const { return api_; }
  const std::string& soname() const { return soname_; }

  // hwloc.h's inline helpers, over the resolved entry points.
  hwloc_obj_t rootObj(hwloc_topology_t topo) const;
  // The object after `prev` (the first when null) of a type at one depth;
  // null at the end or when the type has no single depth.
  hwloc_obj_t nextObjByType(hwloc_topology_t topo, hwloc_obj_type_t type, hwloc_obj_t prev) const;
  int distancesGetByType(hwloc_topology_t topo, hwloc_obj_type_t type, unsigned* nr,
                         hwloc_distances_s** distances, unsigned long kind,
                         unsigned long flags) const;

 private:
  HwlocLibrary(SharedLibrary lib, const HwlocApi& api, std::string soname)
      : lib_(std::move(lib)), api_(api), soname_(std::move(soname)) {}
  SharedLibrary lib_;
  HwlocApi api_;
  std::string soname_;
};

// The process's hwloc: the first of the sonames that loads, opened on first
// use and kept. When none loads, *out is null, `why` says why and `absent`
// tells "not installed" (normal) from "installed but unusable". The answer is
// remembered, so a missing hwloc costs one dlopen attempt per process.
struct HwlocLoad {
  std::shared_ptr<HwlocLibrary> lib;
  bool absent = false;
  std::string why;
};
HwlocLoad processHwloc();

// Test hook: the sonames processHwloc tries from now on (empty: the defaults
// above). Forgets the library or failure it remembered; a library in use by
// someone stays loaded until they let go of it.
void setHwlocSonamesForTesting(const std::vector<std::string>& sonames);

}  // namespace braid::topology
