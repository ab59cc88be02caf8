// braidrun: start N ranks of a program on this host, ready to meet.
//
//   braidrun -n N [--tag-output] [--grace S] [--port P] [--] prog [args...]
//
// Each rank gets NCCL_COMM_ID=127.0.0.1:<port> (a free port unless --port),
// BRAID_RANK, BRAID_WORLD_SIZE, BRAID_LOCAL_RANK and BRAID_LOCAL_SIZE.
// braid derives the same unique id from NCCL_COMM_ID in every rank.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "braidrun/free_port.h"
#include "braidrun/supervisor.h"

extern char** environ;

namespace {

constexpr const char* kAddress = "127.0.0.1";

struct Args {
  int ranks = 0;
  int port = 0;
  bool tagOutput = false;
  double graceSeconds = 2.0;
  std::vector<std::string> command;
};

void usage() {
  std::printf(
      "Usage: braidrun -n N [options] [--] program [args...]\n"
      "Starts N processes of program on this host, ranks 0..N-1 of one braid job.\n"
      "  -n, -np N        number of ranks\n"
      "  --tag-output     prefix every output line with \"[rank] \"\n"
      "  --grace S        seconds between SIGTERM and SIGKILL when stopping ranks (default 2)\n"
      "  --port P         TCP port for NCCL_COMM_ID (default: a free port on 127.0.0.1)\n"
      "  -h, --help\n"
      "Each rank gets NCCL_COMM_ID, BRAID_RANK, BRAID_WORLD_SIZE, BRAID_LOCAL_RANK and\n"
      "BRAID_LOCAL_SIZE. If a rank fails, the others are stopped and braidrun exits with\n"
      "the failed rank's status (128+signal if it was killed by a signal).\n");
}

bool parseNumber(const char* flag, const char* text, long lo, long hi, long* out) {
  errno = 0;
  char* end = nullptr;
  const long v = text ? std::strtol(text, &end, 10) : 0;
  if (!text || errno || end == text || *end || v < lo || v > hi) {
    std::fprintf(stderr, "braidrun: %s needs an integer in [%ld, %ld], got '%s'\n", flag, lo, hi,
                 text ? text : "");
    return false;
  }
  *out = v;
  return true;
}

// Returns 0 to go on, or an exit status (+1) for main.
int parseArgs(int argc, char** argv, Args* a) {
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    long v = 0;
    if (arg == "--") {
      ++i;
      break;
    } else if (arg == "-h" || arg == "--help") {
      usage();
      return 1;
    } else if (arg == "-n" || arg == "-np") {
      if (!parseNumber(arg.c_str(), value, 1, 4096, &v)) return 3;
      a->ranks = static_cast<int>(v);
      ++i;
    } else if (arg == "--port") {
      if (!parseNumber("--port", value, 1, 65535, &v)) return 3;
      a->port = static_cast<int>(v);
      ++i;
    } else if (arg == "--grace") {
      char* end = nullptr;
      const double g = value ? std::strtod(value, &end) : -1;
      if (!value || end == value || *end || !(g >= 0)) {
        std::fprintf(stderr, "braidrun: --grace needs a number of seconds, got '%s'\n", value ? value : "");
        return 3;
      }
      a->graceSeconds = g;
      ++i;
    } else if (arg == "--tag-output") {
      a->tagOutput = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      std::fprintf(stderr, "braidrun: unknown option '%s' (put -- before the program if it is the program's)\n",
                   arg.c_str());
      return 3;
    } else {
      break;
    }
  }
  for (; i < argc; ++i) a->command.emplace_back(argv[i]);
  if (a->ranks < 1) {
    std::fprintf(stderr, "braidrun: say how many ranks with -n N\n");
    return 3;
  }
  if (a->command.empty()) {
    std::fprintf(stderr, "braidrun: no program given\n");
    return 3;
  }
  return 0;
}

std::vector<std::string> rankEnvironment(const Args& a, int rank, int port) {
  const std::vector<std::pair<std::string, std::string>> ours = {
      {"NCCL_COMM_ID", std::string(kAddress) + ":" + std::to_string(port)},
      {"BRAID_RANK", std::to_string(rank)},
      {"BRAID_WORLD_SIZE", std::to_string(a.ranks)},
      {"BRAID_LOCAL_RANK", std::to_string(rank)},
      {"BRAID_LOCAL_SIZE", std::to_string(a.ranks)},
  };
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& kv : ours) replaced = replaced || kv.first == name;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& kv : ours) env.push_back(kv.first + "=" + kv.second);
  return env;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (const int rc = parseArgs(argc, argv, &args)) return rc - 1;

  int port = args.port;
  if (port == 0) {
    std::string error;
    port = braid::run::pickFreePort(kAddress, &error);
    if (port == 0) {
      std::fprintf(stderr, "braidrun: cannot find a free TCP port on %s: %s (use --port)\n", kAddress,
                   error.c_str());
      return 2;
    }
  }

  braid::run::JobSpec job;
  job.argv = args.command;
  job.tagOutput = args.tagOutput;
  job.graceSeconds = args.graceSeconds;
  for (int r = 0; r < args.ranks; ++r) job.env.push_back(rankEnvironment(args, r, port));
  return braid::run::runJob(job);
}
