// Where the cost model's numbers come from: a short measurement on this host
// (reductions, the in-process FIFO, TCP loopback), cached per host in a file,
// with built-in defaults and per-parameter environment overrides.
//
// Ranks must agree on the parameters, or they may choose different algorithms
// for one call and never match up: the values one process holds are for its
// own use at init; a communicator should adopt one rank's values (see
// docs/tuning.md). CalibrationParams is plain data for that reason.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "base/result.h"
#include "tuning/cost_model.h"

namespace braid::tuning {

// Reduction speed differs by datatype family: wide types run native vector
// code, fp16/bf16 convert through float, fp8 goes through tables.
enum class ReduceClass : uint8_t { Wide, Half, BFloat16, Fp8 };
constexpr int kNumReduceClasses = 4;
ReduceClass reduceClassOf(ncclDataType_t type);
const char* reduceClassName(ReduceClass c);

enum class CalibrationSource : uint32_t { Defaults, Measured, Cache };
const char* calibrationSourceName(CalibrationSource s);

struct CalibrationParams {
  double alpha[kNumTransportClasses];  // seconds per step
  double beta[kNumTransportClasses];   // seconds per byte
  double gamma[kNumReduceClasses];     // seconds per byte reduced (sum)
  double copyBeta;                     // seconds per byte of memcpy
  CalibrationSource source;
  uint32_t reserved;
};
static_assert(std::is_trivially_copyable<CalibrationParams>::value, "sent as bytes between ranks");

// The model's parameters for one call.
CostParams costParams(const CalibrationParams& c, TransportClass transport, ncclDataType_t type);

// ---- the pieces, each usable alone (tests, tools) --------------------------------

// Built-in values used with BRAID_CALIBRATE=0 and for anything a measurement
// could not produce. See docs/tuning.md.
CalibrationParams defaultCalibration();

// $XDG_CACHE_HOME/braid/calibration-v2-<host>.txt, else
// $HOME/.cache/braid/calibration-v2-<host>.txt; "" when neither is set.
std::string calibrationCachePath();
// False for a missing, unreadable, incomplete or implausible file.
bool readCalibrationCache(const std::string& path, CalibrationParams* out);
// Writes a temporary file beside `path` and renames it over, creating the
// directory if needed.
Result writeCalibrationCache(const std::string& path, const CalibrationParams& params);

// BRAID_ALPHA_{INPROC,SHM,TCP} (microseconds), BRAID_BW_{INPROC,SHM,TCP} (GB/s),
// BRAID_REDUCE_BW (GB/s, float32 sum; other families keep their ratio) and
// BRAID_COPY_BW (GB/s) replace what they name.
void applyCalibrationOverrides(CalibrationParams* params);

// The whole policy, read from the environment now: BRAID_CALIBRATE=0 gives the
// defaults, =force measures (and rewrites the cache), anything else uses the
// cache if valid and otherwise measures (with `measure`: the measurement moves
// data through transports, which sit above this layer) and writes it;
// overrides come last.
using CalibrationMeasure = Result (*)(CalibrationParams* out);
CalibrationParams resolveCalibration(CalibrationMeasure measure);

// One line per parameter, for logs and the cache file.
std::string describeCalibration(const CalibrationParams& params);

}  // namespace braid::tuning
