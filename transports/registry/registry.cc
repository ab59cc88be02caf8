#include "transports/registry/registry.h"

#include "transports/ib/ib_transport.h"
#include "transports/inproc/inproc_transport.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"

namespace braid {

std::vector<std::unique_ptr<Transport>> makeTransports() {
  std::vector<std::unique_ptr<Transport>> t;
  t.push_back(makeInprocTransport());
  t.push_back(makeShmTransport());
  t.push_back(makeIbTransport());  // cross-host pairs, only with BRAID_IB_DATAPATH=1 (docs/transports.md)
  t.push_back(makeTcpTransport());
  return t;
}

}  // namespace braid
