// Whether this process can use InfiniBand / RoCE, and through which ports.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transports/ib/ib_device_select.h"
#include "transports/ib/ib_verbs_loader.h"

namespace braid::ib {

struct IbProbeOptions {
  std::string sysRoot = "/sys";
  std::string soname = kVerbsSoname;
  std::string hca;       // NCCL_IB_HCA
  std::string gidIndex;  // NCCL_IB_GID_INDEX
  bool disabled = false;  // NCCL_IB_DISABLE
};

IbProbeOptions ibProbeOptionsFromEnv();

struct IbProbeResult {
  bool usable = false;
  std::string reason;           // why not usable, for the INFO line
  std::vector<PortDesc> ports;  // usable ports, NCCL_IB_HCA order of the scan
  int gidIndex = -1;            // NCCL_IB_GID_INDEX, -1 automatic
  std::shared_ptr<VerbsLibrary> lib;
};

// Cheap checks first: the variables, then sysfs (no device: libibverbs is not
// even loaded), then the library and its own device list. Never fails: a
// problem is a reason not to use IB, and TCP takes over.
IbProbeResult probeIb(const IbProbeOptions& options);

}  // namespace braid::ib
