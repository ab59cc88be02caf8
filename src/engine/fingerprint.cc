#include "engine/fingerprint.h"

#include <cstdio>

#include "engine/comm.h"

namespace braid::engine {

namespace {

uint32_t fold(uint64_t h) { return uint32_t(h ^ (h >> 32)); }

// Built-in reductions by their value; every PreMulSum alike (its handle and
// scalar are the rank's own).
uint64_t reductionKey(const Task& t) {
  if (!isReduction(t.coll)) return 0;
  return t.userOp >= 0 && t.userOp < ncclNumOps ? uint64_t(t.userOp) + 1 : 0xff;
}

std::string opText(int op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "PreMulSum op " + std::to_string(op);
  }
}

}  // namespace

bool isPointToPoint(schedule::Collective c) {
  return c == schedule::Collective::Send || c == schedule::Collective::Recv;
}

bool usesRoot(schedule::Collective c) {
  return c == schedule::Collective::Broadcast || c == schedule::Collective::Reduce ||
         c == schedule::Collective::Gather || c == schedule::Collective::Scatter;
}

uint64_t mixHash(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xBF58476D1CE4E5B9ull;
}

uint64_t nextCallNumber(ncclComm* comm, const Task& t) {
  if (!isPointToPoint(t.coll)) return ++comm->collectivesRun;
  std::vector<uint64_t>& counts = t.coll == schedule::Collective::Send ? comm->sendsTo : comm->recvsFrom;
  if (counts.size() < size_t(comm->nranks)) counts.resize(size_t(comm->nranks), 0);
  return ++counts[size_t(t.root)];
}

uint32_t shapeFingerprint(const Task& t, const schedule::CollShape& shape, executor::Protocol protocol) {
  if (isPointToPoint(t.coll)) return fold(mixHash(mixHash(mixHash(0x5032, t.count), uint64_t(t.type)), uint64_t(protocol)));
  uint64_t h = mixHash(0xC011, uint64_t(t.coll));
  h = mixHash(h, t.count);
  h = mixHash(h, uint64_t(t.type));
  h = mixHash(h, reductionKey(t));
  h = mixHash(h, usesRoot(t.coll) ? uint64_t(t.root) : 0);
  h = mixHash(h, uint64_t(t.wire));
  h = mixHash(h, uint64_t(shape.algorithm));
  h = mixHash(h, shape.chunkElems);
  h = mixHash(h, uint64_t(shape.nchannels));
  return fold(mixHash(h, uint64_t(protocol)));
}

uint32_t callFingerprint(uint32_t shape, uint64_t callNumber) { return fold(mixHash(shape, callNumber)); }

std::string describeCall(schedule::Collective coll, uint64_t count, ncclDataType_t type, int userOp, int root) {
  char text[200];
  int n = snprintf(text, sizeof text, "%s(count=%llu, %s", collectiveName(coll), static_cast<unsigned long long>(count),
                   reduce::typeName(type));
  if (isReduction(coll)) n += snprintf(text + n, sizeof text - n, ", %s", opText(userOp).c_str());
  if (usesRoot(coll)) n += snprintf(text + n, sizeof text - n, ", root %d", root);
  if (coll == schedule::Collective::Send) n += snprintf(text + n, sizeof text - n, ", to rank %d", root);
  if (coll == schedule::Collective::Recv) n += snprintf(text + n, sizeof text - n, ", from rank %d", root);
  snprintf(text + n, sizeof text - n, ")");
  return text;
}

std::string describeCall(const Task& t) {
  std::string text = describeCall(t.coll, t.count, t.type, t.userOp, t.root);
  if (t.wire != reduce::WireType::None) text.insert(text.size() - 1, std::string(", wire ") + wireTypeName(t.wire));
  return text;
}

}  // namespace braid::engine
