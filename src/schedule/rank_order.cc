#include "schedule/rank_order.h"

#include <map>

namespace braid::schedule {

RankOrder hostContiguousOrder(const std::vector<uint64_t>& hostOfRank) {
  const int p = static_cast<int>(hostOfRank.size());
  // Hosts keep the order of their first rank; a stable bucket pass keeps ranks ascending.
  std::map<uint64_t, int> hostIndex;
  for (int r = 0; r < p; ++r) hostIndex.emplace(hostOfRank[r], static_cast<int>(hostIndex.size()));
  std::vector<std::vector<int>> byHost(hostIndex.size());
  for (int r = 0; r < p; ++r) byHost[hostIndex[hostOfRank[r]]].push_back(r);
  RankOrder order;
  for (const auto& ranks : byHost) order.rankAt.insert(order.rankAt.end(), ranks.begin(), ranks.end());
  bool identity = true;
  for (int i = 0; i < p && identity; ++i) identity = order.rankAt[i] == i;
  if (identity) return RankOrder{};
  order.positionOf.assign(p, 0);
  for (int i = 0; i < p; ++i) order.positionOf[order.rankAt[i]] = i;
  return order;
}

int crossHostRingLinks(const RankOrder& order, const std::vector<uint64_t>& hostOfRank) {
  const int p = static_cast<int>(hostOfRank.size());
  auto rankAt = [&](int pos) { return order.identity() ? pos : order.rankAt[pos]; };
  int links = 0;
  for (int i = 0; i < p && p > 1; ++i)
    if (hostOfRank[rankAt(i)] != hostOfRank[rankAt((i + 1) % p)]) ++links;
  return links;
}

}  // namespace braid::schedule
