// Entry points of the collectives and point-to-point calls: validate, record the
// task in the current group, no logic beyond that.
#include "api/api_util.h"
#include "base/log.h"
#include "core/comm_registry.h"
#include "core/group.h"
#include "engine/comm.h"
#include "engine/device/device.h"
#include "reduce/host_reduce.h"

namespace braid::api {
namespace {

// Which ranks must pass a non-NULL buffer (when count > 0).
enum class Need { None, All, Root, NonRoot };

struct CallSpec {
  const char* name;
  schedule::Collective coll;
  Need sendbuf;
  Need recvbuf;
  bool reduces;
  bool rooted;  // `root` is a root rank (or, for send/recv, the peer)
};

bool needed(Need n, int rank, int root) {
  return n == Need::All || (n == Need::Root && rank == root) || (n == Need::NonRoot && rank != root);
}

Result resolveOp(ncclComm* comm, ncclRedOp_t op, ncclDataType_t type, const char* fn, reduce::RedOp* out,
                 const void** deviceScalar) {
  if (static_cast<int>(op) >= 0 && op < ncclNumOps) {
    *out = reduce::makeBuiltinOp(op, type, comm->nranks);
    return Result::success();
  }
  const int index = static_cast<int>(op) - ncclNumOps;
  if (index < 0 || index >= static_cast<int>(comm->userOps.size()) || !comm->userOps[index].live)
    return fail(ncclInvalidArgument, "%s: reduction op %d is neither built-in nor a live op created "
                "with ncclRedOpCreatePreMulSum on this communicator", fn, static_cast<int>(op));
  const engine::UserRedOp& u = comm->userOps[index];
  if (u.type != type)
    return fail(ncclInvalidArgument, "%s: reduction op %d was created for %s but the call uses %s", fn,
                static_cast<int>(op), reduce::typeName(u.type), reduce::typeName(type));
  if (u.residence == ncclScalarDevice && device::isDeviceMemory(u.scalarPtr)) {
    // Read when the call runs, on its stream's order (src/engine/device).
    *out = reduce::makePreMulSum(type, nullptr);
    *deviceScalar = u.scalarPtr;
    return Result::success();
  }
  *out = reduce::makePreMulSum(type, u.residence == ncclScalarDevice ? u.scalarPtr : u.scalar);
  return Result::success();
}

// The most bytes a buffer of one call may span: more than a 64-bit process
// can address (47 bits of user space) is a count in the wrong unit, or garbage.
constexpr size_t kMaxBufferBytes = size_t(1) << 47;

// A count whose buffers cannot exist is refused before anything is planned:
// the largest buffer a rank passes (count elements, times the rank count for
// the gathered or scattered side).
Result checkBufferSize(const CallSpec& spec, const engine::Task& t, int nranks) {
  const bool perRank = spec.coll == schedule::Collective::AllGather ||
                       spec.coll == schedule::Collective::ReduceScatter ||
                       spec.coll == schedule::Collective::AllToAll || spec.coll == schedule::Collective::Gather ||
                       spec.coll == schedule::Collective::Scatter;
  size_t bytes = 0;
  if (__builtin_mul_overflow(t.count, reduce::typeSize(t.type), &bytes) ||
      (perRank && __builtin_mul_overflow(bytes, size_t(nranks), &bytes)) || bytes > kMaxBufferBytes)
    return fail(ncclInvalidArgument,
                "%s: count %zu of %s%s is more bytes than a process can address (at most 2^47): is the count "
                "in bytes rather than elements, or uninitialised?",
                spec.name, t.count, reduce::typeName(t.type), perRank ? " per rank" : "");
  return Result::success();
}

Result validate(const CallSpec& spec, engine::Task& t, ncclRedOp_t op) {
  BRAID_TRY(core::checkUsableComm(t.comm, spec.name));
  ncclComm* comm = t.comm;
  if (static_cast<int>(t.type) < 0 || t.type >= ncclNumTypes)
    return fail(ncclInvalidArgument, "%s: datatype %d is not an NCCL datatype (0..%d)", spec.name,
                static_cast<int>(t.type), ncclNumTypes - 1);
  if (spec.rooted && (t.root < 0 || t.root >= comm->nranks))
    return fail(ncclInvalidArgument, "%s: %s %d is out of range for a communicator of %d ranks", spec.name,
                spec.coll == schedule::Collective::Send || spec.coll == schedule::Collective::Recv ? "peer" : "root",
                t.root, comm->nranks);
  BRAID_TRY(checkBufferSize(spec, t, comm->nranks));
  if (spec.reduces) BRAID_TRY(resolveOp(comm, op, t.type, spec.name, &t.op, &t.deviceScalar));
  else
    t.op = reduce::makeBuiltinOp(ncclSum, t.type, comm->nranks);
  if (t.count > 0) {
    if (needed(spec.sendbuf, comm->rank, t.root) && t.sendbuff == nullptr)
      return fail(ncclInvalidArgument, "%s: rank %d passed a NULL send buffer with count %zu",
                  spec.name, comm->rank, t.count);
    if (needed(spec.recvbuf, comm->rank, t.root) && t.recvbuff == nullptr)
      return fail(ncclInvalidArgument, "%s: rank %d passed a NULL receive buffer with count %zu",
                  spec.name, comm->rank, t.count);
  }
  return Result::success();
}

ncclResult_t submit(const CallSpec& spec, engine::Task t, ncclRedOp_t op = ncclSum) {
  t.coll = spec.coll;
  t.userOp = static_cast<int>(op);
  Result r = validate(spec, t, op);
  if (!r.ok()) {
    core::groupFail(r);
    return report(r);
  }
  BRAID_INFO(kLogColl,
             "%s: opCount %llu sendbuff %p recvbuff %p count %zu datatype %s op %d root %d "
             "comm %p [nranks=%d] stream %p",
             spec.name, static_cast<unsigned long long>(t.comm->opCount), t.sendbuff, t.recvbuff, t.count,
             reduce::typeName(t.type), static_cast<int>(op), t.root, static_cast<void*>(t.comm), t.comm->nranks,
             static_cast<void*>(t.stream));
  return report(core::enqueueTask(t));
}

engine::Task makeTask(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, int root,
                      ncclComm_t comm, cudaStream_t stream) {
  engine::Task t;
  t.comm = comm;
  t.sendbuff = sendbuff;
  t.recvbuff = recvbuff;
  t.count = count;
  t.type = type;
  t.root = root;
  t.stream = stream;
  return t;
}

}  // namespace
}  // namespace braid::api

using braid::api::Need;
using braid::schedule::Collective;

BRAID_NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) try {
  static const braid::api::CallSpec spec{"ncclAllReduce", Collective::AllReduce, Need::All, Need::All, true, false};
  return braid::api::submit(spec, braid::api::makeTask(sendbuff, recvbuff, count, datatype, 0, comm, stream), op);
} BRAID_API_CATCH(ncclAllReduce)

BRAID_NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) try {
  static const braid::api::CallSpec spec{
      "ncclReduceScatter", Collective::ReduceScatter, Need::All, Need::All, true, false};
  return braid::api::submit(spec, braid::api::makeTask(sendbuff, recvbuff, recvcount, datatype, 0, comm, stream), op);
} BRAID_API_CATCH(ncclReduceScatter)

BRAID_NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) try {
  static const braid::api::CallSpec spec{"ncclAllGather", Collective::AllGather, Need::All, Need::All, false, false};
  return braid::api::submit(spec, braid::api::makeTask(sendbuff, recvbuff, sendcount, datatype, 0, comm, stream));
} BRAID_API_CATCH(ncclAllGather)

BRAID_NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) try {
  static const braid::api::CallSpec spec{"ncclBroadcast", Collective::Broadcast, Need::Root, Need::All, false, true};
  return braid::api::submit(spec, braid::api::makeTask(sendbuff, recvbuff, count, datatype, root, comm, stream));
} BRAID_API_CATCH(ncclBroadcast)

BRAID_NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream) try {
  static const braid::api::CallSpec spec{"ncclBcast", Collective::Broadcast, Need::Root, Need::All, false, true};
  return braid::api::submit(spec, braid::api::makeTask(buff, buff, count, datatype, root, comm, stream));
} BRAID_API_CATCH(ncclBcast)

BRAID_NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) try {
  static const braid::api::CallSpec spec{"ncclReduce", Collective::Reduce, Need::All, Need::Root, true, true};
  return braid::api::submit(spec, braid::api::makeTask(sendbuff, recvbuff, count, datatype, root, comm, stream), op);
} BRAID_API_CATCH(ncclReduce)

BRAID_NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) try {
  static const braid::api::CallSpec spec{"ncclAlltoAll", Collective::AllToAll, Need::All, Need::All, false, false};
  return braid::api::submit(spec, braid::api::makeTask(sendbuff, recvbuff, count, datatype, 0, comm, stream));
} BRAID_API_CATCH(ncclAlltoAll)

BRAID_NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) try {
  static const braid::api::CallSpec spec{"ncclGather", Collective::Gather, Need::All, Need::Root, false, true};
  return braid::api::submit(spec, braid::api::makeTask(sendbuff, recvbuff, count, datatype, root, comm, stream));
} BRAID_API_CATCH(ncclGather)

BRAID_NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) try {
  static const braid::api::CallSpec spec{"ncclScatter", Collective::Scatter, Need::Root, Need::All, false, true};
  return braid::api::submit(spec, braid::api::makeTask(sendbuff, recvbuff, count, datatype, root, comm, stream));
} BRAID_API_CATCH(ncclScatter)

BRAID_NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype,
               int peer, ncclComm_t comm, cudaStream_t stream) try {
  static const braid::api::CallSpec spec{"ncclSend", Collective::Send, Need::All, Need::None, false, true};
  return braid::api::submit(spec, braid::api::makeTask(sendbuff, nullptr, count, datatype, peer, comm, stream));
} BRAID_API_CATCH(ncclSend)

BRAID_NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
               ncclComm_t comm, cudaStream_t stream) try {
  static const braid::api::CallSpec spec{"ncclRecv", Collective::Recv, Need::None, Need::All, false, true};
  return braid::api::submit(spec, braid::api::makeTask(nullptr, recvbuff, count, datatype, peer, comm, stream));
} BRAID_API_CATCH(ncclRecv)
