#include "core/call_check.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "core/comm_registry.h"
#include "engine/comm.h"
#include "engine/fingerprint.h"

namespace braid::core {

namespace {

// One rank's view of its group on one communicator, as the ranks exchange it.
struct CallRecord {
  uint64_t sequence = 0;  // the first collective's number on this communicator (1-based)
  uint64_t digest = 0;    // of every collective of the group, in order
  uint32_t ncalls = 0;
  int32_t coll = -1;      // the first collective, for the message
  uint64_t count = 0;
  int32_t type = 0;
  int32_t op = 0;
  int32_t root = 0;
  int32_t pad = 0;
};

CallRecord recordOf(ncclComm* comm, const std::vector<engine::Task>& tasks) {
  CallRecord rec;
  for (const engine::Task& t : tasks) {
    if (t.comm != comm || engine::isPointToPoint(t.coll)) continue;
    const int root = engine::usesRoot(t.coll) ? t.root : 0;
    const int op = isReduction(t.coll) ? t.userOp : 0;
    rec.digest = engine::mixHash(
        engine::mixHash(
            engine::mixHash(engine::mixHash(engine::mixHash(rec.digest, static_cast<uint64_t>(t.coll)), t.count),
                            t.type),
            op),
        root);
    if (rec.ncalls++ == 0) {
      rec.coll = static_cast<int32_t>(t.coll);
      rec.count = t.count;
      rec.type = t.type;
      rec.op = op;
      rec.root = root;
    }
  }
  rec.sequence = comm->collectivesChecked + 1;
  return rec;
}

std::string describe(const CallRecord& r) {
  if (r.ncalls == 0) return "no collective (only point-to-point calls, or none)";
  std::string s = engine::describeCall(static_cast<schedule::Collective>(r.coll), r.count,
                                       static_cast<ncclDataType_t>(r.type), r.op, r.root);
  if (r.ncalls > 1) s += " and " + std::to_string(r.ncalls - 1) + " more collective(s) in one group";
  return s;
}

bool sameCalls(const CallRecord& a, const CallRecord& b) {
  return a.ncalls == b.ncalls && a.digest == b.digest;
}

Result checkComm(ncclComm* comm, const std::vector<engine::Task>& tasks) {
  std::vector<CallRecord> all(comm->nranks);
  all[comm->rank] = recordOf(comm, tasks);
  BRAID_TRY(comm->bootstrap->allGather(all.data(), sizeof(CallRecord), engine::deadlineFromNow(comm))
                .context("BRAID_CHECK: comparing calls"));
  comm->collectivesChecked += all[comm->rank].ncalls;
  for (int r = 1; r < comm->nranks; ++r) {
    if (sameCalls(all[r], all[0])) continue;
    return fail(ncclInvalidUsage,
                "rank %d called %s as operation #%llu while rank 0 called %s (BRAID_CHECK=1 compared "
                "the calls of communicator rank %d)",
                r, describe(all[r]).c_str(), static_cast<unsigned long long>(all[r].sequence),
                describe(all[0]).c_str(), comm->rank);
  }
  return Result::success();
}

}  // namespace

Result checkCallsMatch(const std::vector<engine::Task>& tasks) {
  std::vector<ncclComm*> comms;
  for (const engine::Task& t : tasks) {
    if (!t.comm->settings.checkCalls || !t.comm->bootstrap) continue;
    if (std::find(comms.begin(), comms.end(), t.comm) == comms.end()) comms.push_back(t.comm);
  }
  if (comms.empty()) return Result::success();  // BRAID_CHECK off: the path of every call
  if (comms.size() == 1) return checkComm(comms.front(), tasks);
  // One thread may drive several ranks of one job through a group
  // (ncclCommInitAll): each rank's allGather waits for the others', so they
  // must exchange at the same time, not one after another.
  std::vector<Result> results(comms.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < comms.size(); ++i)
    threads.emplace_back([&, i] { results[i] = guarded("BRAID_CHECK", [&] { return checkComm(comms[i], tasks); }); });
  for (std::thread& t : threads) t.join();
  for (Result& r : results)
    if (!r.ok()) return r;
  return Result::success();
}

}  // namespace braid::core
