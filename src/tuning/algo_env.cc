#include "tuning/algo_env.h"

#include <strings.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/log.h"

namespace braid::tuning {

namespace {

constexpr uint8_t kAllAlgos = (1u << schedule::kNumAlgorithms) - 1;
constexpr uint8_t kAllProtos = (1u << kNumProtocols) - 1;

constexpr uint8_t bit(schedule::Algorithm a) { return static_cast<uint8_t>(1u << static_cast<int>(a)); }
constexpr uint8_t bit(Protocol p) { return static_cast<uint8_t>(1u << static_cast<int>(p)); }
constexpr uint32_t bit(schedule::Collective c) { return 1u << static_cast<int>(c); }

// A name the user may write, and the bits it selects. Zero bits: an NCCL name
// braid knows but does not implement.
struct Name {
  const char* name;
  uint8_t bits;
};

const Name kAlgoNames[] = {
    {"ring", bit(schedule::Algorithm::Ring)},
    {"tree", bit(schedule::Algorithm::Tree)},
    {"recursivedoubling", bit(schedule::Algorithm::RecursiveDoubling)},
    {"rd", bit(schedule::Algorithm::RecursiveDoubling)},
    {"recdoubling", bit(schedule::Algorithm::RecursiveDoubling)},
    {"halvingdoubling", bit(schedule::Algorithm::HalvingDoubling)},
    {"hd", bit(schedule::Algorithm::HalvingDoubling)},
    {"rabenseifner", bit(schedule::Algorithm::HalvingDoubling)},
    {"direct", bit(schedule::Algorithm::Direct)},
    {"peeraccess", bit(schedule::Algorithm::PeerAccess)},
    // NCCL's PAT is a logarithmic all-gather / reduce-scatter: ours are these two.
    {"pat",
     static_cast<uint8_t>(bit(schedule::Algorithm::RecursiveDoubling) | bit(schedule::Algorithm::HalvingDoubling))},
    {"collnetdirect", 0},
    {"collnetchain", 0},
    {"nvls", 0},
    {"nvlstree", 0},
};

const Name kProtoNames[] = {
    {"ll", bit(Protocol::LL)},
    {"ll128", bit(Protocol::LL128)},
    {"simple", bit(Protocol::Simple)},
};

struct CollName {
  const char* name;
  uint32_t colls;
};

const CollName kCollNames[] = {
    {"allreduce", bit(schedule::Collective::AllReduce)},
    {"reducescatter", bit(schedule::Collective::ReduceScatter)},
    {"allgather", bit(schedule::Collective::AllGather)},
    {"broadcast", bit(schedule::Collective::Broadcast)},
    {"reduce", bit(schedule::Collective::Reduce)},
    {"alltoall", bit(schedule::Collective::AllToAll)},
    {"gather", bit(schedule::Collective::Gather)},
    {"scatter", bit(schedule::Collective::Scatter)},
    // The two ends of a message must cut it into the same chunks: any of these
    // names both.
    {"send", bit(schedule::Collective::Send) | bit(schedule::Collective::Recv)},
    {"recv", bit(schedule::Collective::Send) | bit(schedule::Collective::Recv)},
    {"sendrecv", bit(schedule::Collective::Send) | bit(schedule::Collective::Recv)},
};

// The collectives that have a choice of algorithm: an unprefixed NCCL_ALGO list
// applies to these only.
constexpr uint32_t kChoosingColls = bit(schedule::Collective::AllReduce) | bit(schedule::Collective::ReduceScatter) |
                                    bit(schedule::Collective::AllGather) | bit(schedule::Collective::Broadcast) |
                                    bit(schedule::Collective::Reduce);
constexpr uint32_t kAllColls = (1u << kNumCollectives) - 1;

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t next = s.find(sep, pos);
    out.push_back(trim(s.substr(pos, next == std::string::npos ? std::string::npos : next - pos)));
    if (next == std::string::npos) return out;
    pos = next + 1;
  }
}

template <size_t N>
const Name* findName(const Name (&table)[N], const std::string& tok) {
  for (const Name& n : table)
    if (strcasecmp(n.name, tok.c_str()) == 0) return &n;
  return nullptr;
}

// One variable's parse: per collective, the allowed bits and whether named.
struct Selection {
  uint8_t mask[kNumCollectives];
  bool forced[kNumCollectives] = {};
};

// "[^]a,b,c" -> allowed bits. Unknown names warn; unimplemented NCCL names are
// collected into `ignored` for one INFO line.
template <size_t N>
uint8_t parseList(const char* var, std::string list, const Name (&table)[N], uint8_t all,
                  std::string* ignored) {
  bool exclude = !list.empty() && list[0] == '^';
  if (exclude) list = trim(list.substr(1));
  uint8_t bits = 0;
  for (const std::string& tok : split(list, ',')) {
    if (tok.empty()) continue;
    const Name* n = findName(table, tok);
    if (!n) {
      BRAID_WARN("%s: unknown name \"%s\" ignored", var, tok.c_str());
      continue;
    }
    if (n->bits == 0) *ignored += (ignored->empty() ? "" : ", ") + tok;
    if (strcasecmp(n->name, "pat") == 0)
      BRAID_INFO(kLogEnv | kLogTuning,
                 "%s: PAT runs as RecursiveDoubling (AllGather) / HalvingDoubling (ReduceScatter)", var);
    bits |= n->bits;
  }
  return exclude ? static_cast<uint8_t>(all & ~bits) : bits;
}

uint32_t parseColls(const char* var, const std::string& prefix) {
  uint32_t colls = 0;
  for (const std::string& tok : split(prefix, ',')) {
    bool found = false;
    for (const CollName& c : kCollNames)
      if (strcasecmp(c.name, tok.c_str()) == 0) {
        colls |= c.colls;
        found = true;
      }
    if (!found) BRAID_WARN("%s: unknown collective \"%s\" ignored", var, tok.c_str());
  }
  return colls;
}

template <size_t N>
Selection parseSelection(const char* var, const char* value, const Name (&table)[N], uint8_t all,
                         uint32_t unprefixedColls) {
  Selection sel;
  for (auto& m : sel.mask) m = all;
  if (!value || !*value) return sel;
  std::string ignored;
  std::vector<std::string> segments = split(value, ';');
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& seg = segments[i];
    if (seg.empty()) continue;
    size_t colon = seg.find(':');
    uint32_t colls = unprefixedColls;
    std::string list = seg;
    if (colon != std::string::npos) {
      colls = parseColls(var, trim(seg.substr(0, colon)));
      list = trim(seg.substr(colon + 1));
    } else if (i != 0) {
      BRAID_WARN("%s: \"%s\" lacks a collective prefix (only the first list may); ignored", var,
                 seg.c_str());
      continue;
    }
    uint8_t bits = parseList(var, list, table, all, &ignored);
    for (int c = 0; c < kNumCollectives; ++c)
      if (colls & (1u << c)) {
        sel.mask[c] = bits;
        sel.forced[c] = true;
      }
  }
  if (!ignored.empty())
    BRAID_INFO(kLogEnv | kLogTuning, "%s: %s not implemented by braid; ignored", var, ignored.c_str());
  return sel;
}

template <typename E, int N>
std::string maskNames(uint8_t mask, const char* (*name)(E)) {
  std::string s;
  for (int i = 0; i < N; ++i)
    if (mask & (1u << i)) s += std::string(s.empty() ? "" : ",") + name(static_cast<E>(i));
  return s.empty() ? "none" : s;
}

}  // namespace

const char* protocolName(Protocol p) {
  switch (p) {
    case Protocol::LL: return "LL";
    case Protocol::LL128: return "LL128";
    case Protocol::Simple: return "Simple";
  }
  return "?";
}

AlgoFilter::AlgoFilter() {
  for (int c = 0; c < kNumCollectives; ++c) {
    algos[c] = kAllAlgos;
    protos[c] = kAllProtos;
    algoForced[c] = protoForced[c] = false;
  }
}

AlgoFilter parseAlgoFilter(const char* ncclAlgo, const char* ncclProto) {
  Selection a = parseSelection("NCCL_ALGO", ncclAlgo, kAlgoNames, kAllAlgos, kChoosingColls);
  Selection p = parseSelection("NCCL_PROTO", ncclProto, kProtoNames, kAllProtos, kAllColls);
  AlgoFilter f;
  for (int c = 0; c < kNumCollectives; ++c) {
    f.algos[c] = a.mask[c];
    f.algoForced[c] = a.forced[c];
    f.protos[c] = p.mask[c];
    f.protoForced[c] = p.forced[c];
  }
  return f;
}

AlgoFilter algoFilterFromEnv() { return parseAlgoFilter(getenv("NCCL_ALGO"), getenv("NCCL_PROTO")); }

const AlgoFilter& envAlgoFilter() {
  static const AlgoFilter filter = [] {
    AlgoFilter f = algoFilterFromEnv();
    if (getenv("NCCL_ALGO") || getenv("NCCL_PROTO"))
      BRAID_INFO(kLogEnv | kLogTuning, "NCCL_ALGO/NCCL_PROTO: %s", describeAlgoFilter(f).c_str());
    return f;
  }();
  return filter;
}

std::string describeAlgoFilter(const AlgoFilter& f) {
  std::string s;
  for (int c = 0; c < kNumCollectives; ++c) {
    if (!f.algoForced[c] && !f.protoForced[c]) continue;
    if (!s.empty()) s += "; ";
    s += collectiveName(static_cast<schedule::Collective>(c));
    s += ": ";
    s += f.algoForced[c] ? maskNames<schedule::Algorithm, schedule::kNumAlgorithms>(f.algos[c], schedule::algorithmName)
                         : "any";
    s += "/";
    s += f.protoForced[c] ? maskNames<Protocol, kNumProtocols>(f.protos[c], protocolName) : "any";
  }
  return s.empty() ? "no restriction" : s;
}

}  // namespace braid::tuning
