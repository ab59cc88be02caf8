// What braid knows about the machine it runs on: CPUs, NUMA nodes, the PCI
// devices that matter for communication (GPUs, NICs), network interfaces and
// InfiniBand devices. Read from sysfs only (hwloc is not required), from a
// root given by the caller so that tests can hand in a fixture tree.
//
// Plain data: discovery never fails on a malformed or missing file; it skips
// what it cannot read and says so in `warnings`, because a machine with an
// odd sysfs must still be able to communicate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace braid {
namespace topo {

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

  int packageCount() const;
  int coreCount() const;  // distinct (package, core) pairs
  std::vector<const PciDevice*> gpus() const;
  bool hasUsableIb() const;
};

// Reads everything below `sysRoot` ("/sys" on a real machine). Fails only when
// `sysRoot` is not a directory.
Result discoverTopology(const std::string& sysRoot, Topology* out);

// Parts of discoverTopology, each reading its own corner of sysfs.
void readCpus(const std::string& sysRoot, Topology* t);
void readNumaNodes(const std::string& sysRoot, Topology* t);  // after readCpus
void readPciDevices(const std::string& sysRoot, Topology* t);
void readNetInterfaces(const std::string& sysRoot, Topology* t);
void readIbDevices(const std::string& sysRoot, Topology* t);

const char* pciKindName(PciKind kind);

}  // namespace topo
}  // namespace braid
