// The rank's side of the conversation with the bootstrap root.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "base/socket.h"

namespace braid::bootstrap {

// Announces `rank` (listening at `listenAddr`) to the root at `root` and waits
// until the root sends every rank's listening address. At `deadline` it asks
// the root which ranks are missing and fails naming them.
Result checkIn(const sockaddr_storage& root, uint64_t magic, int rank, int nranks,
               const sockaddr_storage& listenAddr, Deadline deadline,
               std::vector<sockaddr_storage>* table);

}  // namespace braid::bootstrap
