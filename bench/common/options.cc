#include "common/options.h"

#include <cstring>

namespace braid::bench {
namespace {

// nccl-tests flags that mean nothing here: taken, and only reported when set.
Flag ignoredFlag(char shortName, const char* longName, std::vector<std::string>* ignored) {
  return {shortName, longName, "<n>", "accepted for nccl-tests compatibility; no effect here",
          [=](const char* text, std::string* error) {
            long v = 0;
            const std::string flag = std::string("-") + shortName;
            if (!parseInt(flag, text, 0, 1 << 30, &v, error)) return false;
            if (v != 0) ignored->push_back(flag + " " + text);
            return true;
          }};
}

bool applyOp(const char* text, Options* o, std::string* error) {
  if (parseOpName(text, &o->ops)) return true;
  *error = std::string("unknown operator '") + text + "' for -o (sum, prod, min, max, avg, all)";
  return false;
}

bool applyType(const char* text, Options* o, std::string* error) {
  if (parseTypeName(text, &o->types)) return true;
  *error = std::string("unknown datatype '") + text +
           "' for -d (int8, uint8, int32, uint32, int64, uint64, half, float, double, "
           "bfloat16, fp8e4m3, fp8e5m2, all)";
  return false;
}

bool applyRoot(const char* text, Options* o, std::string* error) {
  long root = -1;  // "all" and "-1": every root in turn
  if (std::strcmp(text, "all") != 0 && std::strcmp(text, "-1") != 0 &&
      !parseInt("-r", text, 0, 1 << 24, &root, error))
    return false;
  o->root = static_cast<int>(root);
  return true;
}

bool applyMemory(const char* text, Options* o, std::string* error) {
  static const struct {
    const char* name;
    MemoryKind kind;
  } kKinds[] = {{"host", MemoryKind::kHost}, {"device", MemoryKind::kDevice}, {"auto", MemoryKind::kAuto}};
  for (const auto& k : kKinds) {
    if (std::strcmp(text, k.name) != 0) continue;
    o->memory = k.kind;
    return true;
  }
  *error = std::string("invalid value '") + text + "' for --memory (host, device or auto)";
  return false;
}

// The flags above take words, not only numbers, so each parses into *o itself.
ApplyFlag bind(bool (*apply)(const char*, Options*, std::string*), Options* o) {
  return [=](const char* text, std::string* error) { return apply(text, o, error); };
}

std::vector<Flag> optionTable(Options* o) {
  std::vector<Flag> t = sweepFlags(o);
  const std::vector<Flag> more = {
      intFlag('m', "agg_iters", 1, 1 << 20, &o->aggIters, "operations grouped into one iteration (default 1)"),
      {'o', "op", "<op>", "sum, prod, min, max, avg or all (default sum)", bind(applyOp, o)},
      {'d', "datatype", "<type>",
       "int8 uint8 int32 uint32 int64 uint64 half float double\nbfloat16 fp8e4m3 fp8e5m2, or all (default float)",
       bind(applyType, o)},
      {'r', "root", "<rank|all>", "root of rooted collectives (default 0)", bind(applyRoot, o)},
      intFlag('a', "average", 0, 3, &o->average,
              "time reported across ranks: 0 rank 0, 1 average,\n2 minimum, 3 maximum (default 1)", "<0-3>"),
      intFlag('z', "blocking", 0, 1, &o->blocking, "barrier after every operation (default 0)", "<0/1>"),
      intFlag('N', "run_cycles", 0, 1 << 30, &o->runCycles,
              "run the whole sweep n times (0 = until killed; default 1)"),
      intFlag('t', "nthreads", 1, 1024, &o->nThreads, "ranks in this process, one thread each (default 1)"),
      intFlag('g', "ngpus", 1, 1024, &o->nGpus, "ranks (GPUs) per thread, their calls grouped"),
      intFlag('G', "cudagraph", 0, 1 << 20, &o->graphLaunches,
              "device memory: capture the timed iterations in a CUDA\n"
              "graph and launch it n times (0: no graph; default 0)"),
      ignoredFlag('p', "parallel_init", &o->ignored),
      ignoredFlag('y', "stream_null", &o->ignored),
      ignoredFlag('T', "timeout", &o->ignored),
      ignoredFlag('C', "report_cputime", &o->ignored),
      {'\0', "memory", "host|device|auto",
       "buffer memory (default auto: the rank's GPU when one is\n"
       "present and the library moves device memory, else host)",
       bind(applyMemory, o)},
  };
  t.insert(t.end(), more.begin(), more.end());
  return t;
}

}  // namespace

ParseStatus parseOptions(int argc, char** argv, Options* out, std::string* error) {
  Options o;
  parseTypeName("float", &o.types);
  parseOpName("sum", &o.ops);
  const ParseStatus status = parseCommandLine(argc, argv, optionTable(&o), o, error);
  if (status == ParseStatus::kOk) *out = std::move(o);
  return status;
}

std::string usage(const char* prog) {
  Options unused;
  return std::string("Usage: ") + prog + " [options]\n" + flagHelp(optionTable(&unused)) +
         "Ranks come from the launcher (braidrun, mpirun, srun, torchrun); see bench/README.md.\n";
}

}  // namespace braid::bench
