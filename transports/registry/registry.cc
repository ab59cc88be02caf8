#include "transports/registry/registry.h"

#include "transports/ib/ib_transport.h"
#include "transports/inproc/inproc_transport.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"

namespace braid::registry {

std::vector<std::unique_ptr<transports::Transport>> makeTransports() {
  std::vector<std::unique_ptr<transports::Transport>> t;
  t.push_back(inproc::makeInprocTransport());
  t.push_back(shm::makeShmTransport());
  t.push_back(ib::makeIbTransport());  // cross-host pairs, only with BRAID_IB_DATAPATH=1 (docs/transports.md)
  t.push_back(tcp::makeTcpTransport());
  return t;
}

}  // namespace braid::registry
