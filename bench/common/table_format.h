// The columns of one measurement in nccl-tests' table ("time algbw busbw
// #wrong"), shared by braid's perf tools and the peer programs of bench/peers
// so that race.sh compares rows printed the same way.
#pragma once

#include <string>

namespace braid::bench {

// Microseconds with as many decimals as fit in 7 characters.
std::string formatTime(double usec);

// "  time  algbw  busbw  #wrong"; wrong < 0 prints N/A (no check was run).
std::string formatResultColumns(double usec, double algbw, double busbw, long long wrong);

}  // namespace braid::bench
