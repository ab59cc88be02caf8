#include "transports/transport.h"

namespace braid {

Result Transport::listen(const ConnectRequest&, std::unique_ptr<RecvEndpoint>*) {
  return fail(ncclInternalError, "the %s transport has no connections: its ranks share the engine's FIFO memory",
              name());
}

Result Transport::connect(const ConnectRequest&, const Blob&, std::unique_ptr<SendConnection>*) {
  return listen(ConnectRequest{}, nullptr);
}

}  // namespace braid
