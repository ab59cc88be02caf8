// braid-topo: what braid sees on this machine, and the transport it would use
// between every pair of ranks of a job laid out as asked.
//
//   braid-topo [-n N] [--hosts H] [--threads] [--sysfs DIR]
#include <netinet/in.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/socket.h"
#include "bootstrap/interfaces.h"
#include "topology/pair_class.h"
#include "topology/placement.h"
#include "topology/sysfs.h"
#include "topology/topology.h"
#include "transports/registry/registry.h"

namespace {

using namespace braid;
using namespace braid::topology;

struct Options {
  std::string sysfs = "/sys";
  braid::topology::PlacementOptions placement;
  bool matrix = false;
};

void usage(FILE* to) {
  std::fprintf(to,
               "usage: braid-topo [-n N] [--hosts H] [--threads] [--sysfs DIR]\n"
               "  -n N        also print the transport between every pair of N ranks\n"
               "  --hosts H   pretend the ranks are spread over H hosts like this one\n"
               "              (rank r on host r*H/N; default 1)\n"
               "  --threads   the ranks of a host are threads of one process\n"
               "  --sysfs DIR read the machine from DIR instead of /sys (implies sysfs)\n"
               "BRAID_TOPO=sysfs|hwloc picks the discovery backend (default: hwloc if built in)\n");
}

bool parsePositive(const char* s, int* out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (!*s || *end || v < 1 || v > 4096) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool hasValue = i + 1 < argc;
    if (a == "-h" || a == "--help") {
      usage(stdout);
      std::exit(0);
    } else if (a == "-n" && hasValue) {
      if (!parsePositive(argv[++i], &o->placement.nranks)) return false;
      o->matrix = true;
    } else if (a == "--hosts" && hasValue) {
      if (!parsePositive(argv[++i], &o->placement.hosts)) return false;
    } else if (a == "--threads") {
      o->placement.threadRanks = true;
    } else if (a == "--sysfs" && hasValue) {
      o->sysfs = argv[++i];
    } else {
      return false;
    }
  }
  if (o->placement.hosts > o->placement.nranks) {
    if (o->matrix) return false;
    o->placement.hosts = 1;
  }
  return true;
}

std::string orNone(const std::string& s) { return s.empty() ? "none" : s; }

std::string numaName(int node) { return node < 0 ? "unknown" : std::to_string(node); }

void printHeader(const braid::topology::Topology& t, const std::string& sysfs) {
  if (t.backend == braid::topology::Backend::kHwloc)
    std::printf("braid-topo: backend hwloc %s (interfaces and InfiniBand from %s)\n",
                t.backendVersion.c_str(), sysfs.c_str());
  else
    std::printf("braid-topo: backend sysfs, machine read from %s\n", sysfs.c_str());
}

void printCpus(const braid::topology::Topology& t) {
  cpu_set_t set;
  int usable = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
  std::printf("cpus: %zu online (%s), %d usable by this process, %d core(s) in %d package(s)\n",
              t.onlineCpus.size(), braid::topology::formatCpuList(t.onlineCpus).c_str(), usable, t.coreCount(),
              t.packageCount());
  for (const topology::Cpu& c : t.cpus)
    std::printf("  cpu %d: package %d core %d numa %s\n", c.id, c.package, c.core,
                numaName(c.numaNode).c_str());
}

void printNuma(const braid::topology::Topology& t) {
  std::printf("numa nodes: %zu\n", t.numaNodes.size());
  for (const braid::topology::NumaNode& n : t.numaNodes) {
    std::string d;
    for (int v : n.distances) d += (d.empty() ? "" : " ") + std::to_string(v);
    std::printf("  node %d: cpus %s, distances [%s]\n", n.id, orNone(braid::topology::formatCpuList(n.cpus)).c_str(),
                d.empty() ? "unknown" : d.c_str());
  }
}

void printPci(const braid::topology::Topology& t) {
  auto printKind = [&](braid::topology::PciKind kind, const char* title) {
    int count = 0;
    for (const braid::topology::PciDevice& d : t.pci) count += d.kind == kind;
    std::printf("%s: %s\n", title, count ? std::to_string(count).c_str() : "none");
    for (const braid::topology::PciDevice& d : t.pci)
      if (d.kind == kind)
        std::printf("  %s: vendor 0x%04x device 0x%04x class 0x%06x numa %s path %s\n",
                    d.busId.c_str(), d.vendor, d.device, d.classCode, numaName(d.numaNode).c_str(),
                    d.path.c_str());
  };
  printKind(braid::topology::PciKind::kGpu, "gpus");
  printKind(braid::topology::PciKind::kNic, "nics");
  printKind(braid::topology::PciKind::kInfiniBand, "infiniband nics (pci)");
}

void printInterfaces(const braid::topology::Topology& t) {
  std::printf("interfaces: %zu\n", t.interfaces.size());
  for (const topology::NetDevice& n : t.interfaces) {
    std::string speed = n.speedMbps > 0 ? std::to_string(n.speedMbps) + " Mb/s" : "unknown";
    std::printf("  %s: %s (operstate %s), speed %s, device %s\n", n.name.c_str(),
                n.up ? "up" : "down", orNone(n.operstate).c_str(), speed.c_str(),
                n.pciBusId.empty() ? "virtual" : ("pci " + n.pciBusId).c_str());
  }
}

void printIb(const braid::topology::Topology& t) {
  std::printf("infiniband devices: %s\n", t.ib.empty() ? "none" : std::to_string(t.ib.size()).c_str());
  for (const braid::topology::IbDevice& d : t.ib) {
    std::printf("  %s: pci %s, %s\n", d.name.c_str(), orNone(d.pciBusId).c_str(),
                d.usable() ? "usable" : "no active port");
    for (const braid::topology::IbPort& p : d.ports)
      std::printf("    port %d: %s, %s, %s\n", p.number, orNone(p.state).c_str(),
                  orNone(p.linkLayer).c_str(), orNone(p.rate).c_str());
  }
}

void printBootstrapInterface() {
  const std::string spec = envString("NCCL_SOCKET_IFNAME");
  sockaddr_storage addr{};
  std::string ifname;
  Result r = braid::bootstrap::chooseLocalAddress(nullptr, &addr, &ifname);
  std::printf("bootstrap/tcp interface (NCCL_SOCKET_IFNAME=%s): ", spec.empty() ? "<unset>" : spec.c_str());
  if (r.ok())
    std::printf("%s %s\n", ifname.c_str(), hostToString(addr).c_str());
  else
    std::printf("none: %s\n", r.message().c_str());
}

void printMatrix(const braid::topology::Topology& t, const braid::topology::PlacementOptions& opt) {
  const std::vector<braid::topology::RankPlacement> ranks = simulatePlacements(t, opt);
  const auto transports = braid::registry::makeTransports();
  std::printf("\n%d rank(s) on %d host(s)%s:\n", opt.nranks, opt.hosts,
              opt.threadRanks ? ", one process per host" : ", one process per rank");
  for (int r = 0; r < opt.nranks; ++r)
    std::printf("  rank %d: host %d, gpu %s, numa %s\n", r, hostOfRank(r, opt),
                orNone(ranks[r].gpuBusId).c_str(), numaName(ranks[r].numaNode).c_str());
  std::printf("transport matrix (row = sender, column = receiver):\n%8s", "");
  for (int c = 0; c < opt.nranks; ++c) std::printf(" %7d", c);
  std::printf("\n");
  bool starred = false;
  for (int r = 0; r < opt.nranks; ++r) {
    std::printf("%8d", r);
    for (int c = 0; c < opt.nranks; ++c) {
      braid::topology::PairTransport p = classifyPair(ranks[r], ranks[c], transports);
      starred |= !p.implemented();
      std::printf(" %7s", p.shortName().c_str());
    }
    std::printf("\n");
  }
  if (starred)
    std::printf("  x* = the topology calls for x, which braid does not implement yet:\n"
                "       p2p* runs over shm, ib* over tcp today\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parseArgs(argc, argv, &opt)) {
    usage(stderr);
    return 2;
  }
  topology::Topology t;
  Result r = discoverMachine(opt.sysfs, &t);
  if (!r.ok()) {
    std::fprintf(stderr, "braid-topo: %s\n", r.message().c_str());
    return 1;
  }
  printHeader(t, opt.sysfs);
  printCpus(t);
  printNuma(t);
  printPci(t);
  printInterfaces(t);
  printIb(t);
  printBootstrapInterface();
  for (const std::string& w : t.warnings) std::printf("warning: %s\n", w.c_str());
  if (opt.matrix) printMatrix(t, opt.placement);
  return 0;
}
