// What braid knows about the machine it runs on: CPUs, NUMA nodes, the PCI
// devices that matter for communication (GPUs, NICs), network interfaces and
// InfiniBand devices. Two backends fill the same structure: sysfs (always
// built, reads from a root given by the caller so that tests can hand in a
// fixture tree) and hwloc (built when BRAID_HWLOC finds its headers, libhwloc
// loaded at run time: hwloc_discovery.h, hwloc_loader.h).
//
// Plain data: discovery never fails on a malformed or missing file; it skips
// what it cannot read and says so in `warnings`, because a machine with an
// odd sysfs must still be able to communicate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace braid::topology {

struct Cpu {
  int id = -1;
  int package = -1;  // physical_package_id, -1 when unknown
  int core = -1;     // core_id within the package, -1 when unknown
  int numaNode = -1;
};

struct NumaNode {
  int id = -1;
  std::vector<int> cpus;
  std::vector<int> distances;  // to every node, in the order of Topology::numaNodes
};

enum class PciKind { kGpu, kNic, kInfiniBand };

enum class Backend { kSysfs, kHwloc };

struct PciDevice {
  std::string busId;  // "0000:3b:00.0"
  PciKind kind = PciKind::kNic;
  uint32_t vendor = 0;
  uint32_t device = 0;
  uint32_t classCode = 0;  // 24 bits: class, subclass, prog-if
  int numaNode = -1;       // -1: the kernel does not know (single node or VM)
  std::string path;        // bridges from the root complex: "0000:00:01.0/0000:3b:00.0"
};

struct NetDevice {
  std::string name;
  std::string pciBusId;  // empty for virtual interfaces (lo, bridges, veth)
  int speedMbps = -1;    // -1: the driver does not say (virtio, down links)
  bool up = false;       // IFF_UP in `flags`
  std::string operstate;
};

struct IbPort {
  int number = 0;
  std::string state;      // "4: ACTIVE"
  std::string linkLayer;  // "InfiniBand" or "Ethernet" (RoCE)
  std::string rate;       // "100 Gb/sec (4X EDR)"
  bool active() const;
};

struct IbDevice {
  std::string name;  // "mlx5_0"
  std::string pciBusId;
  std::vector<IbPort> ports;
  // At least one port is ACTIVE: a queue pair could be brought up on it.
  bool usable() const;
};

struct Topology {
  std::vector<int> onlineCpus;  // /sys/devices/system/cpu/online
  std::vector<Cpu> cpus;        // one per online CPU
  std::vector<NumaNode> numaNodes;
  std::vector<PciDevice> pci;   // GPUs and NICs only
  std::vector<NetDevice> interfaces;
  std::vector<IbDevice> ib;
  std::vector<std::string> warnings;
  Backend backend = Backend::kSysfs;  // which one filled the structure
  std::string backendVersion;         // hwloc's library version ("2.9.0"); empty for sysfs

  int packageCount() const;
  int coreCount() const;  // distinct (package, core) pairs
  std::vector<const PciDevice*> gpus() const;
  bool hasUsableIb() const;
};

// Reads everything below `sysRoot` ("/sys" on a real machine). Fails only when
// `sysRoot` is not a directory.
Result discoverTopology(const std::string& sysRoot, Topology* out);

// Whether this build has the hwloc backend (BRAID_HWLOC at configure time).
bool hwlocBuiltIn();

// Whether the hwloc backend can run in this process: built in, and libhwloc
// loads at run time with the ABI this build was compiled for (tried once per
// process; a missing hwloc is logged once at INFO, an unusable one at WARN).
// `why` (when not null) says why not.
bool hwlocAvailable(std::string* why = nullptr);

// The backend for a BRAID_TOPO value: "" -> hwloc when available, else sysfs;
// "sysfs"; "hwloc" (sysfs and a warning when not available). Any other value
// warns and is taken as "". `warning` is cleared when there is nothing to say.
Backend chooseBackend(const std::string& request, std::string* warning);

// This machine, read by the backend chooseBackend picks for $BRAID_TOPO. hwloc
// reads the running kernel only, so a `sysRoot` other than "/sys" (a fixture)
// means sysfs, with a warning if hwloc was asked for. A libhwloc missing at run
// time means sysfs too (logged at INFO; a warning when BRAID_TOPO=hwloc), and so
// does an hwloc that fails to read the machine (a warning). Fails only when the
// sysfs root is not a directory.
Result discoverMachine(const std::string& sysRoot, Topology* out);

// Parts of discoverTopology, each reading its own corner of sysfs.
void readCpus(const std::string& sysRoot, Topology* t);
void readNumaNodes(const std::string& sysRoot, Topology* t);  // after readCpus
// The distance row of each node already in t->numaNodes; rows of the wrong
// length are dropped with a warning.
void readNumaDistances(const std::string& sysRoot, Topology* t);
// Cpu::numaNode from the nodes' CPU lists (sorted).
void assignCpusToNodes(Topology* t);
void readPciDevices(const std::string& sysRoot, Topology* t);
void readNetInterfaces(const std::string& sysRoot, Topology* t);
void readIbDevices(const std::string& sysRoot, Topology* t);

// Whether braid cares about a PCI device of this vendor and 24-bit class, and as what.
bool pciKindOf(uint32_t vendor, uint32_t classCode, PciKind* kind);

const char* pciKindName(PciKind kind);
const char* backendName(Backend backend);  // "sysfs", "hwloc"

}  // namespace braid::topology
