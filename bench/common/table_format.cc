#include "common/table_format.h"

#include <cstdio>

namespace braid::bench {

std::string formatTime(double usec) {
  char buf[32];
  if (usec >= 10000.0) {
    std::snprintf(buf, sizeof buf, "%7.0f", usec);
  } else if (usec >= 100.0) {
    std::snprintf(buf, sizeof buf, "%7.1f", usec);
  } else {
    std::snprintf(buf, sizeof buf, "%7.2f", usec);
  }
  return buf;
}

std::string formatResultColumns(double usec, double algbw, double busbw, long long wrong) {
  char wrongText[32];
  if (wrong < 0) {
    std::snprintf(wrongText, sizeof wrongText, "%6s", "N/A");
  } else {
    std::snprintf(wrongText, sizeof wrongText, "%6lld", wrong);
  }
  char buf[128];
  std::snprintf(buf, sizeof buf, "  %7s  %6.2f  %6.2f  %s", formatTime(usec).c_str(), algbw, busbw, wrongText);
  return buf;
}

}  // namespace braid::bench
