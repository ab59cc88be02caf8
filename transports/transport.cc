#include "transports/transport.h"

namespace braid::transports {

namespace {

Result noConnections(const char* transport) {
  return fail(ncclInternalError, "the %s transport has no connections: its ranks share the engine's FIFO memory",
              transport);
}

}  // namespace

Result Transport::listen(const ConnectRequest&, std::unique_ptr<RecvEndpoint>*) { return noConnections(name()); }

Result Transport::connect(const ConnectRequest&, const Blob&, std::unique_ptr<SendConnection>*) {
  return noConnections(name());
}

}  // namespace braid::transports
