#include "bootstrap/checkin.h"

#include "bootstrap/root.h"
#include "bootstrap/wire.h"
#include "core/log.h"

namespace braid {

namespace {

// How long a rank past its deadline waits for the root to say who is missing.
constexpr auto kQueryGrace = std::chrono::seconds(2);

Result readMissing(const Socket& s, const RootReply& reply, int rank, int nranks,
                   const sockaddr_storage& root, Deadline deadline) {
  if (reply.count > static_cast<uint32_t>(nranks))
    return fail(ncclRemoteError, "bootstrap root at %s sent a corrupt status (%u missing of %d)",
                addrToString(root).c_str(), reply.count, nranks);
  std::vector<int32_t> miss(reply.count);
  IoProgress p;
  IoStatus st = recvExact(s, miss.data(), miss.size() * sizeof(int32_t), deadline, nullptr, &p);
  std::vector<int> never, left;
  for (int32_t r : miss) (r >= 0 ? never : left).push_back(r >= 0 ? r : -r - 1);
  std::string list = st != IoStatus::kDone ? "(unknown: " + describeIo(st, p, 0) + ")"
                     : never.empty()        ? std::string("none")
                                            : formatRankList(never);
  std::string gone = left.empty() ? std::string()
                                  : " (ranks " + formatRankList(left) +
                                        " checked in but have given up since)";
  return fail(ncclRemoteError,
              "rank %d of %d timed out waiting for ranks %s to check in with the bootstrap root at "
              "%s%s. Check that those ranks were started, with nranks=%d and the same unique id",
              rank, nranks, list.c_str(), addrToString(root).c_str(), gone.c_str(), nranks);
}

Result readTable(const Socket& s, const RootReply& reply, int rank, int nranks,
                 const sockaddr_storage& root, Deadline deadline,
                 std::vector<sockaddr_storage>* table) {
  if (reply.count != static_cast<uint32_t>(nranks))
    return fail(ncclRemoteError,
                "bootstrap root at %s sent a table of %u ranks to rank %d of a %d-rank job",
                addrToString(root).c_str(), reply.count, rank, nranks);
  std::vector<WireAddr> wire(nranks);
  IoProgress p;
  IoStatus st = recvExact(s, wire.data(), wire.size() * sizeof(WireAddr), deadline, nullptr, &p);
  if (st != IoStatus::kDone)
    return fail(ncclRemoteError, "rank %d: reading the address table from the bootstrap root at %s: %s",
                rank, addrToString(root).c_str(),
                describeIo(st, p, wire.size() * sizeof(WireAddr)).c_str());
  table->assign(nranks, sockaddr_storage{});
  for (int r = 0; r < nranks; ++r) {
    if (!unpackAddr(wire[r], &(*table)[r]))
      return fail(ncclRemoteError, "bootstrap root at %s sent rank %d no valid address for rank %d",
                  addrToString(root).c_str(), rank, r);
  }
  return Result::success();
}

}  // namespace

Result checkIn(const sockaddr_storage& root, uint64_t magic, int rank, int nranks,
               const sockaddr_storage& listenAddr, Deadline deadline,
               std::vector<sockaddr_storage>* table) {
  Socket s;
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

  RootReply reply{};
  IoProgress got;
  st = recvExact(s, &reply, sizeof(reply), deadline, nullptr, &got);
  Deadline replyDeadline = deadline;
  if (st == IoStatus::kTimeout) {
    // Ask the root who is missing; the table may still come first (a close race).
    replyDeadline = Clock::now() + kQueryGrace;
    Hello query = hello;
    query.kind = kHelloQuery;
    IoProgress qp;
    if (sendExact(s, &query, sizeof(query), replyDeadline, nullptr, &qp) == IoStatus::kDone)
      st = recvExact(s, &reply, sizeof(reply), replyDeadline, nullptr, &got);
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
                addrToString(root).c_str(), describeIo(st, got, sizeof(reply)).c_str());
  if (reply.magic != magic)
    return fail(ncclRemoteError,
                "the process at %s answered rank %d's hello with a wrong magic: it is not this "
                "job's bootstrap root (stale NCCL_COMM_ID port reused by another job?)",
                addrToString(root).c_str(), rank);
  if (reply.kind == kReplyMissing)
    return readMissing(s, reply, rank, nranks, root, replyDeadline);
  if (reply.kind != kReplyTable)
    return fail(ncclRemoteError, "bootstrap root at %s sent rank %d an unknown reply %#x",
                addrToString(root).c_str(), rank, reply.kind);
  return readTable(s, reply, rank, nranks, root, replyDeadline, table);
}

}  // namespace braid
