#include "bootstrap/checkin.h"

#include <algorithm>

#include "base/diagnosis_signal.h"
#include "base/log.h"
#include "bootstrap/root.h"
#include "bootstrap/wire.h"

namespace braid::bootstrap {

namespace {

// How long a rank past its deadline waits for the root to say who is missing.
constexpr auto kQueryGrace = std::chrono::seconds(2);

// Reads the `bytes` that follow the reply header into `out`.
Result readPayload(const UniqueFd& s, size_t bytes, int rank, const sockaddr_storage& root,
                   Deadline deadline, std::vector<uint8_t>* out) {
  out->assign(bytes, 0);
  IoProgress p;
  IoStatus st = recvExact(s, out->data(), bytes, deadline, nullptr, &p);
  if (st != IoStatus::kDone)
    return fail(ncclRemoteError, "rank %d: reading the reply of the bootstrap root at %s: %s",
                rank, addrToString(root).c_str(), describeIo(st, p, bytes).c_str());
  return Result::success();
}

Result reportMissing(const UniqueFd& s, const RootReply& reply, int rank, int nranks,
                     const sockaddr_storage& root, Deadline deadline) {
  std::vector<uint8_t> bytes;
  MissingRanks miss;
  Result r = readPayload(s, rootReplyPayloadBytes(reply), rank, root, deadline, &bytes);
  if (r.ok()) r = decodeMissingRanks(bytes.data(), bytes.size(), nranks, &miss);
  std::string list = !r.ok()             ? "(unknown: " + r.message() + ")"
                     : miss.never.empty() ? std::string("none")
                                          : formatRankList(miss.never);
  std::string gone = miss.left.empty() ? std::string()
                                       : " (ranks " + formatRankList(miss.left) +
                                             " checked in but have given up since)";
  return fail(ncclRemoteError,
              "rank %d of %d timed out waiting for ranks %s to check in with the bootstrap root at "
              "%s%s. Check that those ranks were started, with nranks=%d and the same unique id",
              rank, nranks, list.c_str(), addrToString(root).c_str(), gone.c_str(), nranks);
}

Result readTable(const UniqueFd& s, const RootReply& reply, int rank, int nranks,
                 const sockaddr_storage& root, Deadline deadline,
                 std::vector<sockaddr_storage>* table) {
  std::vector<uint8_t> bytes;
  BRAID_TRY(readPayload(s, rootReplyPayloadBytes(reply), rank, root, deadline, &bytes));
  Result r = decodeAddressTable(bytes.data(), bytes.size(), nranks, table);
  if (!r.ok())
    return r.context("rank " + std::to_string(rank) + ": the address table from the bootstrap root at " +
                     addrToString(root) + " is corrupt");
  return Result::success();
}

}  // namespace

// Waits for the root's reply in slices, so that a SIGUSR1 meanwhile is answered.
template <typename Describe>
IoStatus awaitReply(const UniqueFd& s, RootReply* raw, Deadline deadline, IoProgress* got, Describe describe) {
  WaitDiagnosis diagnosis;
  for (;;) {
    const Deadline slice = std::min(deadline, Clock::now() + std::chrono::milliseconds(200));
    const IoStatus st = recvExact(s, raw, sizeof(*raw), slice, nullptr, got);
    if (st != IoStatus::kTimeout || Clock::now() >= deadline) return st;
    diagnosis.poll(describe);
  }
}

Result checkIn(const sockaddr_storage& root, uint64_t magic, int rank, int nranks,
               const sockaddr_storage& listenAddr, Deadline deadline,
               std::vector<sockaddr_storage>* table) {
  UniqueFd s;
  Result r = connectWithRetry(root, deadline, nullptr, &s);
  if (!r.ok())
    return Result(ncclRemoteError, r.message())
        .context("rank " + std::to_string(rank) +
                 " cannot reach the bootstrap root (is the process that made the unique id, or "
                 "rank 0 with NCCL_COMM_ID, running? does NCCL_SOCKET_IFNAME pick a reachable "
                 "interface?)");

  Hello hello{};
  hello.magic = magic;
  hello.kind = kHelloCheckIn;
  hello.rank = rank;
  hello.nranks = nranks;
  packAddr(listenAddr, &hello.addr);
  IoProgress sent;
  IoStatus st = sendExact(s, &hello, sizeof(hello), deadline, nullptr, &sent);
  if (st != IoStatus::kDone)
    return fail(ncclRemoteError, "rank %d could not send its hello to the bootstrap root at %s: %s",
                rank, addrToString(root).c_str(), describeIo(st, sent, sizeof(hello)).c_str());

  RootReply raw{};
  IoProgress got;
  st = awaitReply(s, &raw, deadline, &got, [&] {
    return "rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
           ": in communicator creation, waiting for every rank to check in with the bootstrap root at " +
           addrToString(root);
  });
  Deadline replyDeadline = deadline;
  if (st == IoStatus::kTimeout) {
    // Ask the root who is missing; the table may still come first (a close race).
    replyDeadline = Clock::now() + kQueryGrace;
    Hello query = hello;
    query.kind = kHelloQuery;
    IoProgress qp;
    if (sendExact(s, &query, sizeof(query), replyDeadline, nullptr, &qp) == IoStatus::kDone)
      st = recvExact(s, &raw, sizeof(raw), replyDeadline, nullptr, &got);
    if (st == IoStatus::kTimeout)
      return fail(ncclRemoteError,
                  "rank %d of %d timed out waiting for the other ranks to check in with the "
                  "bootstrap root at %s, and the root did not say which are missing",
                  rank, nranks, addrToString(root).c_str());
  }
  if (st == IoStatus::kClosed)
    return fail(ncclRemoteError,
                "the bootstrap root at %s closed its connection to rank %d before sending the "
                "address table: it rejected this rank (see the root's WARN log: wrong nranks, "
                "duplicate rank, different unique id?) or gave up after BRAID_BOOTSTRAP_TIMEOUT",
                addrToString(root).c_str(), rank);
  if (st != IoStatus::kDone)
    return fail(ncclRemoteError, "rank %d waiting for the bootstrap root at %s: %s", rank,
                addrToString(root).c_str(), describeIo(st, got, sizeof(raw)).c_str());
  RootReply reply;
  r = decodeRootReply(&raw, sizeof(raw), magic, nranks, &reply);
  if (!r.ok())
    return r.context("the process at " + addrToString(root) + " answered rank " +
                     std::to_string(rank) + "'s hello wrongly");
  if (reply.kind == kReplyMissing)
    return reportMissing(s, reply, rank, nranks, root, replyDeadline);
  return readTable(s, reply, rank, nranks, root, replyDeadline, table);
}

}  // namespace braid::bootstrap
