#include "base/env.h"

#include <cctype>
#include <cstdlib>
#include <strings.h>

#include "base/log.h"

namespace braid {

bool envIsSet(const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0';
}

std::string envString(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

int64_t envInt(const char* name, int64_t fallback) {
  const char* v = getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long long n = strtoll(v, &end, 0);
  if (end == v) {
    BRAID_WARN("%s=%s is not a number; using %lld", name, v, (long long)fallback);
    return fallback;
  }
  switch (toupper(static_cast<unsigned char>(*end))) {
    case 'K': n <<= 10; ++end; break;
    case 'M': n <<= 20; ++end; break;
    case 'G': n <<= 30; ++end; break;
    default: break;
  }
  if (*end != '\0' && !(toupper(static_cast<unsigned char>(*end)) == 'B' && end[1] == '\0')) {
    BRAID_WARN("%s=%s has trailing characters; using %lld", name, v, (long long)fallback);
    return fallback;
  }
  return n;
}

bool envBool(const char* name, bool fallback) {
  const char* v = getenv(name);
  if (!v || !*v) return fallback;
  if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
    return true;
  if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off"))
    return false;
  BRAID_WARN("%s=%s is not a boolean; using %d", name, v, fallback ? 1 : 0);
  return fallback;
}

}  // namespace braid
