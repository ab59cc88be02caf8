#include "topology/hwloc_discovery.h"

#include <hwloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <utility>

#include "topology/hwloc_loader.h"
#include "topology/sysfs.h"

namespace braid::topology {

namespace {

using PciAttr = hwloc_obj_attr_u::hwloc_pcidev_attr_s;  // nested in the C union

// One loaded topology and the library it came from (kept loaded until the
// topology is destroyed).
class Hwloc {
 public:
  explicit Hwloc(std::shared_ptr<HwlocLibrary> lib) : lib_(std::move(lib)) {}
  ~Hwloc() {
    if (topo_) lib_->api().topologyDestroy(topo_);
  }
  Hwloc(const Hwloc&) = delete;
  Hwloc& operator=(const Hwloc&) = delete;

  // The running machine, or the hwloc XML export in `xml` when it is not empty.
  Result load(const std::string& xml);
  const HwlocLibrary& lib() const { return *lib_; }
  const HwlocApi& api() const { return lib_->api(); }
  hwloc_topology_t topo() const { return topo_; }
  hwloc_obj_t root() const { return lib_->rootObj(topo_); }
  hwloc_obj_t next(hwloc_obj_type_t type, hwloc_obj_t prev) const {
    return lib_->nextObjByType(topo_, type, prev);
  }

 private:
  std::shared_ptr<HwlocLibrary> lib_;
  hwloc_topology_t topo_ = nullptr;
};

Result Hwloc::load(const std::string& xml) {
  const HwlocApi& a = api();
  if (a.topologyInit(&topo_) != 0) {
    topo_ = nullptr;
    return systemFail("hwloc: hwloc_topology_init failed");
  }
  if (!xml.empty() &&
      a.topologySetXmlbuffer(topo_, xml.data(), static_cast<int>(xml.size()) + 1) != 0)
    return systemFail("hwloc: cannot use the XML topology given");
  // sysfs lists every online CPU, also those outside this process's cpuset;
  // the two backends must describe the same machine.
  a.topologySetFlags(topo_, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  // "Important" keeps GPUs, NICs, the bridges above them and their OS devices.
  a.topologySetIoTypesFilter(topo_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (a.topologyLoad(topo_) != 0) return systemFail("hwloc: hwloc_topology_load failed");
  return Result::success();
}

// A distance matrix handed out by hwloc, given back when done.
class Distances {
 public:
  explicit Distances(const Hwloc& h) : h_(h) {}
  ~Distances() {
    if (d_) h_.api().distancesRelease(h_.topo(), d_);
  }
  Distances(const Distances&) = delete;
  Distances& operator=(const Distances&) = delete;
  hwloc_distances_s** slot() { return &d_; }
  const hwloc_distances_s* get() const { return d_; }

 private:
  const Hwloc& h_;
  hwloc_distances_s* d_ = nullptr;
};

std::vector<int> bitmapToList(const HwlocApi& a, hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (!set) return out;
  for (int i = a.bitmapFirst(set); i >= 0; i = a.bitmapNext(set, i)) out.push_back(i);
  return out;
}

int osIndexOf(hwloc_obj_t obj) {
  return obj && obj->os_index != HWLOC_UNKNOWN_INDEX ? static_cast<int>(obj->os_index) : -1;
}

// hwloc.h's inline helpers that only walk the object structs (ancestors, infos)
// are called as they are; those that call into the library go through Hwloc.
void hwlocCpus(const Hwloc& h, Topology* t) {
  hwloc_obj_t pu = nullptr;
  while ((pu = h.next(HWLOC_OBJ_PU, pu)) != nullptr) {
    Cpu cpu;
    cpu.id = osIndexOf(pu);
    if (cpu.id < 0) continue;
    cpu.package = osIndexOf(hwloc_get_ancestor_obj_by_type(h.topo(), HWLOC_OBJ_PACKAGE, pu));
    cpu.core = osIndexOf(hwloc_get_ancestor_obj_by_type(h.topo(), HWLOC_OBJ_CORE, pu));
    t->cpus.push_back(cpu);
  }
  std::sort(t->cpus.begin(), t->cpus.end(), [](const Cpu& a, const Cpu& b) { return a.id < b.id; });
  for (const Cpu& c : t->cpus) t->onlineCpus.push_back(c.id);
}

// hwloc's latency matrix from the OS, in the order of t->numaNodes; false when
// hwloc has none (it keeps no matrix for a single node) or it misses a node.
bool hwlocNumaDistances(const Hwloc& h, Topology* t) {
  unsigned count = 1;
  Distances d(h);
  const unsigned long kind = HWLOC_DISTANCES_KIND_FROM_OS | HWLOC_DISTANCES_KIND_MEANS_LATENCY;
  if (h.lib().distancesGetByType(h.topo(), HWLOC_OBJ_NUMANODE, &count, d.slot(), kind, 0) != 0 ||
      count == 0 || !d.get() || d.get()->nbobjs != t->numaNodes.size())
    return false;
  const unsigned n = d.get()->nbobjs;
  std::vector<unsigned> row(n);  // our node index -> the matrix's
  for (unsigned i = 0; i < n; ++i) {
    auto it = std::find_if(t->numaNodes.begin(), t->numaNodes.end(), [&](const NumaNode& node) {
      return node.id == osIndexOf(d.get()->objs[i]);
    });
    if (it == t->numaNodes.end()) return false;
    row[it - t->numaNodes.begin()] = i;
  }
  for (unsigned a = 0; a < n; ++a) {
    NumaNode& node = t->numaNodes[a];
    node.distances.clear();
    for (unsigned b = 0; b < n; ++b)
      node.distances.push_back(static_cast<int>(d.get()->values[row[a] * n + row[b]]));
  }
  return true;
}

void hwlocNumaNodes(const Hwloc& h, const std::string& sysRoot, Topology* t) {
  hwloc_obj_t obj = nullptr;
  while ((obj = h.next(HWLOC_OBJ_NUMANODE, obj)) != nullptr) {
    NumaNode node;
    node.id = osIndexOf(obj);
    if (node.id < 0) continue;
    node.cpus = bitmapToList(h.api(), obj->cpuset);
    t->numaNodes.push_back(std::move(node));
  }
  std::sort(t->numaNodes.begin(), t->numaNodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  if (!hwlocNumaDistances(h, t)) readNumaDistances(sysRoot, t);
  assignCpusToNodes(t);
}

std::string busIdOf(const PciAttr& a) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", static_cast<unsigned>(a.domain),
                static_cast<unsigned>(a.bus), static_cast<unsigned>(a.dev),
                static_cast<unsigned>(a.func));
  return buf;
}

// The PCI functions from the root complex down to `dev`: the PCI-to-PCI bridges
// above it (a host bridge is not a PCI function, as in the sysfs path).
std::string pathOf(hwloc_obj_t dev) {
  std::string path = busIdOf(dev->attr->pcidev);
  for (hwloc_obj_t p = dev->parent; p && p->type == HWLOC_OBJ_BRIDGE; p = p->parent)
    if (p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
      path = busIdOf(p->attr->bridge.upstream.pci) + "/" + path;
  return path;
}

// The node a device hangs off when hwloc placed it below a single-node part of
// the machine; directly below the root (a VM, or no locality info) is unknown,
// as the kernel's numa_node of -1 is.
int numaNodeOf(const Hwloc& h, hwloc_obj_t dev) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(h.topo(), dev);
  if (!anc || anc == h.root() || !anc->nodeset || h.api().bitmapWeight(anc->nodeset) != 1)
    return -1;
  return h.api().bitmapFirst(anc->nodeset);
}

void hwlocPciDevices(const Hwloc& h, const std::string& sysRoot, Topology* t) {
  hwloc_obj_t obj = nullptr;
  while ((obj = h.next(HWLOC_OBJ_PCI_DEVICE, obj)) != nullptr) {
    const PciAttr& a = obj->attr->pcidev;
    PciDevice dev;
    dev.vendor = a.vendor_id;
    dev.device = a.device_id;
    dev.classCode = static_cast<uint32_t>(a.class_id) << 8;
    if (!pciKindOf(dev.vendor, dev.classCode, &dev.kind)) continue;
    dev.busId = busIdOf(a);
    // hwloc 2.9 keeps class and subclass only; the programming interface byte
    // comes from sysfs when it agrees on the rest.
    uint32_t full = 0;
    if (readHex(sysRoot + "/bus/pci/devices/" + dev.busId + "/class", &full) &&
        (full >> 8) == a.class_id)
      dev.classCode = full;
    dev.numaNode = numaNodeOf(h, obj);
    dev.path = pathOf(obj);
    t->pci.push_back(std::move(dev));
  }
  std::sort(t->pci.begin(), t->pci.end(),
            [](const PciDevice& a, const PciDevice& b) { return a.busId < b.busId; });
}

// hwloc's OS devices name the PCI function of each interface and HCA.
void hwlocDeviceBusIds(const Hwloc& h, Topology* t) {
  hwloc_obj_t os = nullptr;
  while ((os = h.next(HWLOC_OBJ_OS_DEVICE, os)) != nullptr) {
    if (!os->name || !os->parent || os->parent->type != HWLOC_OBJ_PCI_DEVICE) continue;
    const std::string busId = busIdOf(os->parent->attr->pcidev);
    if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) {
      for (NetDevice& n : t->interfaces)
        if (n.name == os->name) n.pciBusId = busId;
    } else if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
      for (IbDevice& d : t->ib)
        if (d.name == os->name) d.pciBusId = busId;
    }
  }
}

Result discover(const std::string& xml, const std::string& sysRoot, Topology* out) {
  struct stat st;
  if (stat(sysRoot.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail(ncclInvalidArgument, "topology: %s is not a directory (expected a sysfs root)",
                sysRoot.c_str());
  HwlocLoad loaded = processHwloc();
  if (!loaded.lib) return fail(ncclSystemError, "hwloc: %s", loaded.why.c_str());
  Hwloc h(std::move(loaded.lib));
  BRAID_TRY(h.load(xml));
  Topology t;
  t.backend = Backend::kHwloc;
  // hwloc writes its own release into the root object at load time.
  const char* version = hwloc_obj_get_info_by_name(h.root(), "hwlocVersion");
  t.backendVersion = version ? version : "";
  hwlocCpus(h, &t);
  hwlocNumaNodes(h, sysRoot, &t);
  hwlocPciDevices(h, sysRoot, &t);
  readNetInterfaces(sysRoot, &t);
  readIbDevices(sysRoot, &t);
  hwlocDeviceBusIds(h, &t);
  *out = std::move(t);
  return Result::success();
}

}  // namespace

Result discoverTopologyHwloc(const std::string& sysRoot, Topology* out) {
  return discover("", sysRoot, out);
}

Result discoverTopologyHwlocXml(const std::string& xml, const std::string& sysRoot,
                                Topology* out) {
  if (xml.empty()) return fail(ncclInvalidArgument, "hwloc: empty XML topology");
  return discover(xml, sysRoot, out);
}

}  // namespace braid::topology
