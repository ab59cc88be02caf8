// The calibration of this process: the cost model's parameters measured by
// moving data through the transports (or read from the cache, see
// tuning/calibration.h), once per process.
#pragma once

#include "base/result.h"
#include "tuning/calibration.h"

namespace braid::engine {

// Measures everything now (~40-150 ms, two threads). Values that cannot be
// measured or come out implausible keep their defaults; fails only when
// nothing at all could be measured.
Result measureCalibration(tuning::CalibrationParams* out);

// The process's parameters, resolved on first use (thread-safe; up to ~150 ms
// when it measures) by resolveCalibration(measureCalibration) and kept for the
// process's life.
const tuning::CalibrationParams& calibration();

}  // namespace braid::engine
