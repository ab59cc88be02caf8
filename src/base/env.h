// Typed access to environment variables. Every variable braid reads is listed
// in docs/environment.md.
#pragma once

#include <cstdint>
#include <string>

namespace braid {

// Returns the variable's value or `fallback` when unset or empty.
std::string envString(const char* name, const std::string& fallback = "");
// Integer with optional K/M/G suffix (binary); malformed values warn and give `fallback`.
int64_t envInt(const char* name, int64_t fallback);
// 1/true/yes/on are true, 0/false/no/off are false.
bool envBool(const char* name, bool fallback);
bool envIsSet(const char* name);

}  // namespace braid
