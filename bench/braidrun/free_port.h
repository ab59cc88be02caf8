#pragma once

#include <string>

namespace braid::run {

// A closed range of TCP ports; empty by default.
struct PortRange {
  int first = 0;
  int last = -1;
  int size() const { return last >= first ? last - first + 1 : 0; }
};

// The ports the kernel hands out by itself, for bind() to port 0 and for the
// local end of every outgoing connection (/proc/sys/net/ipv4/ip_local_port_range;
// Linux's default when that cannot be read).
PortRange ephemeralPorts();

// Where braidrun looks for rank 0's port: below the ephemeral range, so that
// no outgoing connection of another process can take the port between the
// choice and rank 0's bind (on a busy machine one did). Empty when the
// ephemeral range leaves too little room below it.
PortRange portsBelowEphemeral(PortRange ephemeral);

// A port of `candidates` that can be bound on `address` now, tried from a
// random place (two jobs started together rarely try the same ports); with
// empty candidates, one the kernel picks (bind to port 0). Returns 0 and sets
// *error on failure.
int pickFreePort(const std::string& address, PortRange candidates, std::string* error);

// pickFreePort among portsBelowEphemeral(ephemeralPorts()).
int pickFreePort(const std::string& address, std::string* error);

}  // namespace braid::run
