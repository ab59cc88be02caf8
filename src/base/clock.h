// The one clock of the library: deadlines, timeouts and waits all use it.
#pragma once

#include <chrono>

namespace braid {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

}  // namespace braid
