// Transport over InfiniBand / RoCE verbs (libibverbs loaded at run time).
#pragma once

#include <memory>

#include "transports/ib/ib_probe.h"
#include "transports/transport.h"

namespace braid {

// Probes once per process (NCCL_IB_DISABLE, NCCL_IB_HCA, NCCL_IB_GID_INDEX,
// sysfs, libibverbs) and says at INFO what it found. canConnect is false in
// this build whatever the probe says: the RC data path (RDMA write with
// immediate into the receiver's slots, completion polling, credits) is not
// written yet, so every pair falls through to TCP. docs/transports.md.
std::unique_ptr<Transport> makeIbTransport();

// The same over a probe the caller made (tests: fixture sysfs, fake soname).
std::unique_ptr<Transport> makeIbTransport(ib::IbProbeResult probe);

// False until the data path exists; canConnect never exceeds it.
bool ibDataPathReady();

}  // namespace braid
