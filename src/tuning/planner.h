// The per-call choice: which schedule runs a collective and with what chunk,
// from the cost model, the calibrated parameters and NCCL_ALGO / NCCL_PROTO.
//
// Every rank of a communicator must make the same choice for a call, so every
// input must be the same on all ranks: the transport class is computed over the
// whole communicator (slowestTransportClass) and the calibration parameters
// must be one rank's, shared at init (see docs/tuning.md).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/peer_info.h"
#include "reduce/wire_format.h"
#include "schedule/generate.h"
#include "tuning/algo_env.h"
#include "tuning/calibration.h"
#include "tuning/cost_model.h"

namespace braid::tuning {

struct TuningInput {
  schedule::Collective coll = schedule::Collective::AllReduce;
  int nranks = 1;
  size_t count = 0;  // elements, in CollShape::count's per-call meaning
  ncclDataType_t datatype = ncclFloat32;
  TransportClass transport = TransportClass::SharedMemory;  // the communicator's slowest
  size_t slotBytes = 512 * 1024;  // CommSettings::slotBytes: no chunk is larger
  int nchannels = 1;              // CommSettings::nchannels
  const AlgoFilter* filter = nullptr;               // nullptr: envAlgoFilter()
  const CalibrationParams* calibration = nullptr;   // required: the communicator's
  // A wire type (Task::wire): every algorithm but PeerAccess (which moves no
  // message); the model prices the wire's bytes, and a chunk fills a slot
  // with narrow values. Fixed64 (reproducible mode's exact sums): the ring only.
  reduce::WireType wire = reduce::WireType::None;
  // Every rank's buffers are addressable by every lane and the ranks' calls
  // run as one launch or host group (engine/lanes/peer_access.h): only then
  // may the PeerAccess algorithm run. Never with a wire type.
  bool peerAccess = false;
};

struct PlanChoice {
  schedule::Algorithm algorithm = schedule::Algorithm::Ring;
  size_t chunkElems = 1;  // CollShape::chunkElems
  int nchannels = 1;      // CollShape::nchannels
  double predictedSeconds = 0;
  Protocol protocol = Protocol::Simple;  // the chunk-size class the chunk falls in
  bool forced = false;                   // NCCL_ALGO or NCCL_PROTO narrowed the choice
};

// The fastest allowed (algorithm, chunk) for the call by the model; logs one
// line at INFO TUNING. No allocation unless logging. Algorithms without a
// generator (algorithmSupports) are never chosen.
PlanChoice choosePlan(const TuningInput& in);

// As choosePlan, among the algorithms whose bit (1 << Algorithm) is set in
// `implemented`, without logging. When `perAlgorithm` is not null it receives,
// per Algorithm, the best predicted seconds (+infinity where not evaluated).
PlanChoice choosePlanAmong(const TuningInput& in, uint8_t implemented, double* perAlgorithm);

// The TUNING log line for a choice ("AllReduce 4096 B x 8 ranks (SharedMemory):
// RecursiveDoubling/LL chunk 2048 elems 1 ch, predicted 4.1 us (Ring 15.0 us, ...)").
void formatPlanChoice(const TuningInput& in, const PlanChoice& choice, const double* perAlgorithm,
                      char* buf, size_t len);

// The plan interpreter's protocol for a call whose largest
// buffer is opBytes: LL carries 4 data bytes per 8-byte line (twice the bytes
// on the wire) but needs no flag after a fence (one alpha less per message),
// so the model prefers it below alpha/beta bytes. NCCL_PROTO decides where it
// names the protocols (LL alone forces it; no LL forbids it). Never LL above
// llPayloadBytes, the LL FIFOs' slot.
bool laneUsesLL(const TuningInput& in, uint64_t opBytes, uint64_t llPayloadBytes);

// The class the model should use for a communicator: InProcess when every rank
// is in one process, SharedMemory when all share a host and /dev/shm (and
// shm is not disabled), Tcp otherwise. The same on every rank.
TransportClass slowestTransportClass(const std::vector<PeerInfo>& peers, bool shmDisabled);

}  // namespace braid::tuning
