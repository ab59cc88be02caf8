// Why these calls count as synchronising (fake_runtime.cc calls checkSync in
// each of them):
//
//  - cudaDeviceSynchronize: waits for all work of the device.
//  - cudaFree, cudaFreeHost: documented to synchronise the device implicitly
//    (a free waits until no work may still use the memory).
//  - cudaMalloc, cudaHostAlloc (cudaMallocHost): the programming guide's
//    "implicit synchronization" list names device memory allocation and
//    page-locked host memory allocation: commands of different streams
//    issued around them may not overlap, and in practice the allocation may
//    wait for the device; a spinning kernel that waits for later work then
//    never ends.
//  - cudaMemset ("device memory set" in the guide's list), and cudaMemcpy
//    between two device addresses ("a memory copy between two addresses to
//    the same device memory"). Other cudaMemcpy are synchronous calls on the
//    legacy default stream: they wait behind blocking streams only, so they
//    count only while a tracked kernel is on a blocking stream.
//  - work enqueued on the legacy default stream itself (cudaMemcpyAsync,
//    kernels, events with stream 0): serialised behind every blocking
//    stream, so behind an outstanding kernel there.
//  - cudaIpcOpenMemHandle, cudaIpcCloseMemHandle: they map and unmap memory
//    in the context, which the driver may do only with the device quiet;
//    treated as synchronising.
//  - a copy (cudaMemcpy, cudaMemcpyAsync, cudaMemcpy2DAsync) to or from
//    pageable host memory, on any stream: the driver stages it itself, and
//    on an H200 one of braid's waited inside the driver for ever while the
//    application's copy back to pageable memory waited, behind a kernel
//    that waited for braid's thread (two thread ranks of a process, one
//    still setting up FIFOs). Counted when braid makes it: the application's
//    waits for the work it chose.
//
// Not counted: cudaEventQuery, cudaStreamQuery, cudaMemcpyAsync between
// device and pinned memory and cudaMallocAsync/cudaFreeAsync on a stream
// other than the legacy one,
// cudaEventRecord, cudaStreamWaitEvent, cudaLaunchHostFunc, attribute and
// pointer queries, cudaStreamSynchronize / cudaEventSynchronize (they wait
// for one stream, which the caller chose), cudaStreamCreate/Destroy.
//
// A tracked kernel is one of braid's plan-kernel or stream-wait launches, or
// the test application's gate kernel (it spins until braid's calls return),
// from cudaLaunch... (enqueue) to the end of its emulated run.
//
// Every violation is recorded and printed with its backtrace; those made by
// braid's library fail the test (the hook), those made by the application
// (the test program: it frees its buffers while another rank's stream still
// runs, say) only with BRAID_FAKECUDA_APP_CALLS=fail.
#include "recorder.h"

#include <dlfcn.h>
#include <execinfo.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include "fake_device.h"
#include "fakecuda.h"
#include "immortal.h"

namespace fakecuda {

namespace {

struct Outstanding {
  std::string what;
  cudaStream_t stream;
  bool blocking;  // on the legacy stream or a blocking one
  std::chrono::steady_clock::time_point since;
};

struct State {
  std::mutex mu;
  uint64_t nextId = 1;
  std::map<uint64_t, Outstanding> launches;
  std::vector<Violation> violations;
  std::function<void(const Violation&)> hook;
  int expecting = 0;  // live ExpectViolations
};

// Never destroyed: stream workers may finish launches while the process exits.
State& state() { return immortal<State>(); }

bool appCallsFail() {
  const char* s = std::getenv("BRAID_FAKECUDA_APP_CALLS");
  return s != nullptr && std::string(s) == "fail";
}

// file:line of a frame, through addr2line (violations only: no cost otherwise).
std::string sourceOf(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  // A return address points after the call: one byte back is inside it.
  const uintptr_t offset = reinterpret_cast<uintptr_t>(address) - reinterpret_cast<uintptr_t>(info.dli_fbase) - 1;
  char command[1024];
  std::snprintf(command, sizeof command, "addr2line -Cfpi -e '%s' 0x%zx 2>/dev/null", info.dli_fname, size_t(offset));
  FILE* pipe = popen(command, "r");
  if (pipe == nullptr) return "";
  std::string out;
  char line[512];
  while (std::fgets(line, sizeof line, pipe) != nullptr) out += std::string("      ") + line;
  pclose(pipe);
  return out;
}

bool strict() {
  const char* s = std::getenv("BRAID_FAKECUDA_STRICT");
  return s != nullptr && *s != '\0' && std::string(s) != "0";
}

// The shared object the return address lies in: braid's library (the layer
// objects) or the application (the test program).
std::string callerOf(const void* returnAddress) {
  Dl_info info{};
  if (returnAddress == nullptr || dladdr(returnAddress, &info) == 0 || info.dli_fname == nullptr) return "unknown";
  const std::string who = info.dli_fname;
  const std::string base = who.substr(who.rfind('/') + 1);
  const bool braid = base.rfind("libbraid", 0) == 0;
  std::ostringstream out;
  out << (braid ? "braid" : "application") << " (" << who;
  if (info.dli_sname) out << ": " << info.dli_sname;
  out << " +0x" << std::hex
      << (reinterpret_cast<uintptr_t>(returnAddress) - reinterpret_cast<uintptr_t>(info.dli_fbase)) << ")";
  return out.str();
}

// The frames above the fake runtime, the first ones resolved to source lines.
std::string backtraceHere() {
  void* frames[24];
  const int n = backtrace(frames, 24);
  char** names = backtrace_symbols(frames, n);
  Dl_info self{};
  dladdr(reinterpret_cast<const void*>(&backtraceHere), &self);
  std::string out;
  int resolved = 0;
  for (int i = 0; i < n && names != nullptr; ++i) {
    Dl_info info{};
    if (dladdr(frames[i], &info) != 0 && info.dli_fbase == self.dli_fbase) continue;  // the fake runtime
    out += std::string("    ") + names[i] + "\n";
    if (resolved++ < 6) out += sourceOf(frames[i]);
  }
  std::free(names);  // backtrace_symbols' one malloc'd block
  return out;
}

std::string describeOutstanding(const std::map<uint64_t, Outstanding>& launches) {
  std::ostringstream out;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [id, l] : launches)
    out << "    #" << id << " " << l.what << " on stream " << static_cast<const void*>(l.stream) << ", enqueued "
        << std::chrono::duration_cast<std::chrono::milliseconds>(now - l.since).count() << " ms ago\n";
  return out.str();
}

}  // namespace

uint64_t trackLaunch(const std::string& what, cudaStream_t stream) {
  bool known = false;
  const Stream* st = Device::get().lookup(stream, &known);
  const bool blocking = st != nullptr && st->blocking();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const uint64_t id = s.nextId++;
  s.launches[id] = {what, stream, blocking, std::chrono::steady_clock::now()};
  return id;
}

void finishLaunch(uint64_t id) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.launches.erase(id);
}

uint64_t launchesTracked() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.nextId - 1;
}

bool launchesOutstanding() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return !s.launches.empty();
}

bool checkSync(const char* call, const void* returnAddress, bool onlyBlocking, bool braidsOnly) {
  State& s = state();
  Violation v;
  std::function<void(const Violation&)> hook;
  bool expected = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    bool counts = false;
    for (const auto& entry : s.launches) counts = counts || !onlyBlocking || entry.second.blocking;
    if (!counts) return false;
    v.call = call;
    v.outstanding = describeOutstanding(s.launches);
    hook = s.hook;
    expected = s.expecting > 0;
  }
  v.caller = callerOf(returnAddress);
  if (braidsOnly && v.caller.rfind("braid", 0) != 0 && !expected && !appCallsFail()) return false;
  v.backtrace = backtraceHere();
  const bool fails = !expected && (v.caller.rfind("braid", 0) == 0 || appCallsFail());
  v.expected = !fails;
  std::fprintf(stderr,
               "fakecuda: %sVIOLATION: synchronising call %s by %s while tracked kernels are outstanding:\n%s"
               "  called from:\n%s",
               fails ? "" : "(not failing: expected, or the application's) ", v.call.c_str(), v.caller.c_str(),
               v.outstanding.c_str(), v.backtrace.c_str());
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.violations.push_back(v);
  }
  if (!fails) return true;
  if (strict()) {
    std::fprintf(stderr, "fakecuda: BRAID_FAKECUDA_STRICT is set: aborting at the first violation\n");
    std::abort();
  }
  if (hook) hook(v);
  return true;
}

std::vector<Violation> violations() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.violations;
}

size_t violationCount() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.violations.size();
}

void setViolationHook(std::function<void(const Violation&)> hook) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.hook = std::move(hook);
}

ExpectViolations::ExpectViolations() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.expecting;
}

ExpectViolations::~ExpectViolations() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  --s.expecting;
}

}  // namespace fakecuda
