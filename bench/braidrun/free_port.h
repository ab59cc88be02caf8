#pragma once

#include <string>

namespace braid::run {

// Asks the kernel for a TCP port that is free on `address` right now (bind to
// port 0, read it back, close). Returns 0 and sets *error on failure. The port
// can in principle be taken again before rank 0 binds it; the window is short.
int pickFreePort(const std::string& address, std::string* error);

}  // namespace braid::run
