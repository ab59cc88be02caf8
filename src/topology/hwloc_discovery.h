// Topology discovery through hwloc. Compiled only when CMake's BRAID_HWLOC
// finds hwloc (it defines BRAID_HAVE_HWLOC); callers go through
// discoverMachine, which falls back to sysfs in builds without it.
#pragma once

#include <string>

#include "base/result.h"
#include "topology/topology.h"

namespace braid::topology {

// CPUs, NUMA nodes with their distances, and the GPUs and NICs on the PCI tree,
// from hwloc's view of the running machine. hwloc has no link state, speed or
// virtual interfaces, so the interface and InfiniBand lists are read from sysfs
// below `sysRoot`, and the PCI function of each is then taken from hwloc's OS
// device of the same name where hwloc has one. libhwloc itself is loaded at
// run time (hwloc_loader.h); fails, saying why, when it cannot be loaded or
// cannot read the machine.
Result discoverTopologyHwloc(const std::string& sysRoot, Topology* out);

// The same from an hwloc XML export (lstopo foo.xml) instead of the running
// machine, so tests can describe machines this one is not.
Result discoverTopologyHwlocXml(const std::string& xml, const std::string& sysRoot,
                                Topology* out);

}  // namespace braid::topology
