// Transport over InfiniBand / RoCE verbs (libibverbs loaded at run time).
#pragma once

#include <memory>

#include "transports/ib/ib_probe.h"
#include "transports/transport.h"

namespace braid::ib {

// The switch: the RC data path (ib_connection.h) was only ever run against
// tests/ib's fake libibverbs, never on hardware, so it is off unless
// BRAID_IB_DATAPATH=1.
struct IbTransportOptions {
  bool dataPath = false;
};

IbTransportOptions ibTransportOptionsFromEnv();

// Probes once per process (NCCL_IB_DISABLE, NCCL_IB_HCA, NCCL_IB_GID_INDEX,
// sysfs, libibverbs) and says at INFO what it found and chose. canConnect is
// true only with BRAID_IB_DATAPATH=1, a usable port and a peer on another host
// (same-host pairs are shm's, or TCP's where shm cannot join them).
// docs/transports.md.
std::unique_ptr<transports::Transport> makeIbTransport();

// The same over a probe the caller made (tests: fixture sysfs, fake soname).
std::unique_ptr<transports::Transport> makeIbTransport(ib::IbProbeResult probe, IbTransportOptions options = {});

}  // namespace braid::ib
