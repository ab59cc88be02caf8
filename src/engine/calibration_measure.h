// The calibration of this process: the cost model's parameters measured by
// moving data through the transports (or read from the cache, see
// tuning/calibration.h), once per process.
#pragma once

#include <functional>
#include <vector>

#include "base/result.h"
#include "tuning/calibration.h"

namespace braid::engine {

// Measures everything now (~40-150 ms). The link latencies and bandwidths are
// timed between two threads pinned to two CPUs of this process's cpuset (the
// caller's own first; its affinity is left as it was). Values that cannot be
// measured or come out implausible keep their defaults; fails (so that nothing
// is cached) when no link could be measured, or when the cpuset holds one CPU,
// where the links keep their defaults.
Result measureCalibration(tuning::CalibrationParams* out);

// The same with the measuring threads on cpus[0] and cpus[1] (fewer than two:
// the one-CPU case above). For tests.
Result measureCalibrationOn(const std::vector<int>& cpus, tuning::CalibrationParams* out);

// One link's latency samples: seconds per hop of batches of kRoundTripBatch
// round trips each, timed one after another until `seconds` have passed and
// at least kMinRoundTripBatches batches were timed (so one stall of the peer
// cannot be the only sample), or `maxRoundTrips` ran. Stops with *ok false at
// the first round trip that fails. measureCalibration's ping-pong, exposed for
// tests.
constexpr int kRoundTripBatch = 16;
constexpr int kMinRoundTripBatches = 8;
std::vector<double> timeRoundTripBatches(const std::function<bool()>& roundTrip, double seconds, int maxRoundTrips,
                                         bool* ok);

// The process's parameters, resolved on first use (thread-safe; up to ~150 ms
// when it measures) by resolveCalibration(measureCalibration) and kept for the
// process's life.
const tuning::CalibrationParams& calibration();

}  // namespace braid::engine
