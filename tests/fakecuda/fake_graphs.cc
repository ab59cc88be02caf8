// Stream capture, graphs, executable graphs and user objects of the fake CUDA
// runtime (the rules it enforces: fake_capture.h).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "fake_capture.h"
#include "fake_device.h"
#include "immortal.h"

namespace fakecuda {
namespace {

struct UserObject {
  void* ptr = nullptr;
  cudaHostFn_t destroy = nullptr;
  unsigned refs = 0;
};

// A node: work captured on branch `branch` (the capture's streams, numbered
// in the order they joined), after nodes `deps` (earlier indices).
struct Node {
  Work work;
  std::vector<size_t> deps;
  size_t branch = 0;
};

struct Graph {
  std::vector<Node> nodes;
  size_t branches = 1;
  std::vector<std::pair<UserObject*, unsigned>> objects;  // references it holds
};

struct Exec {
  std::vector<Node> nodes;
  std::vector<Stream*> branches;  // a stream of its own per branch
  std::vector<std::pair<UserObject*, unsigned>> objects;
  std::vector<Position> lastLaunch;  // where its last launch ends
};

struct Capture {
  unsigned long long id = 0;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  Stream* origin = nullptr;
  Graph* graph = nullptr;
  bool invalidated = false;
};

struct StreamCapture {
  Capture* capture = nullptr;
  size_t branch = 0;
  std::vector<size_t> frontier;  // the nodes its next node depends on
};

struct EventCapture {
  unsigned long long id = 0;  // of the capture that recorded it
  std::vector<size_t> nodes;
};

struct State {
  std::mutex mu;
  unsigned long long nextId = 1;
  std::map<Capture*, std::unique_ptr<Capture>> captures;  // active (begun, not ended)
  std::map<Stream*, StreamCapture> streams;                // streams in an active capture
  std::map<Event*, EventCapture> events;                   // events recorded in a capture
  std::map<Graph*, std::unique_ptr<Graph>> graphs;
  std::map<Exec*, std::unique_ptr<Exec>> execs;
  std::map<UserObject*, std::unique_ptr<UserObject>> objects;
  Stream* callbacks = nullptr;  // where user objects' destructors run
};

std::atomic<int> activeCaptures{0};

State& state() { return immortal<State>(); }  // stream workers may use it at exit

// The stream behind a handle; null for an unknown one.
Stream* streamOf(cudaStream_t handle) {
  bool known = false;
  Stream* s = Device::get().lookup(handle, &known);
  return known ? s : nullptr;
}

// Whether a blocking stream captures (the legacy stream then may not be used).
bool blockingCapturesLocked(State& st) {
  for (auto& [s, sc] : st.streams)
    if (s->blocking()) return true;
  return false;
}

Capture* captureById(State& st, unsigned long long id) {
  for (auto& [c, owned] : st.captures)
    if (c->id == id) return c;
  return nullptr;
}

// Drops `n` references; at zero the destructor runs on the callback stream
// after `after` (outstanding launches), as CUDA runs it on a thread of its own.
void releaseLocked(State& st, UserObject* o, unsigned n, const std::vector<Position>& after) {
  if (st.objects.count(o) == 0) return;
  o->refs = n >= o->refs ? 0 : o->refs - n;
  if (o->refs != 0) return;
  if (st.callbacks == nullptr) st.callbacks = Device::get().createStream(0, false);
  st.callbacks->push([fn = o->destroy, ptr = o->ptr] { fn(ptr); }, after);
  st.objects.erase(o);
}

// Every node some node of `frontier` depends on, and those nodes.
std::set<size_t> reach(const Graph& g, const std::vector<size_t>& frontier) {
  std::set<size_t> seen;
  std::vector<size_t> todo = frontier;
  while (!todo.empty()) {
    const size_t n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    for (size_t d : g.nodes[n].deps) todo.push_back(d);
  }
  return seen;
}

void addUnique(std::vector<size_t>* to, const std::vector<size_t>& from) {
  for (size_t n : from)
    if (std::find(to->begin(), to->end(), n) == to->end()) to->push_back(n);
}

}  // namespace

cudaError_t legacyDuringCapture() {
  if (activeCaptures.load() == 0) return cudaSuccess;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (!blockingCapturesLocked(st)) return cudaSuccess;
  for (auto& [s, sc] : st.streams)
    if (s->blocking()) sc.capture->invalidated = true;
  return cudaErrorStreamCaptureImplicit;
}

bool streamCaptures(Stream* s) {
  if (activeCaptures.load() == 0) return false;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.streams.count(s) != 0;
}

bool captureWork(Stream* s, Work work, const std::vector<Position>& after, cudaError_t* err) {
  if (activeCaptures.load() == 0) return false;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto it = st.streams.find(s);
  if (it == st.streams.end()) return false;
  StreamCapture& sc = it->second;
  if (sc.capture->invalidated) {
    *err = cudaErrorStreamCaptureInvalidated;
    return true;
  }
  if (!after.empty()) {
    // A wait on work outside the capture (cudaStreamWaitEvent decides the
    // waits on captured events before this).
    sc.capture->invalidated = true;
    *err = cudaErrorStreamCaptureIsolation;
    return true;
  }
  Graph& g = *sc.capture->graph;
  g.nodes.push_back(Node{std::move(work), sc.frontier, sc.branch});
  sc.frontier = {g.nodes.size() - 1};
  *err = cudaSuccess;
  return true;
}

cudaError_t refuseOnCapturingStream(Stream* s) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto it = st.streams.find(s);
  if (it == st.streams.end()) return cudaSuccess;
  it->second.capture->invalidated = true;
  return cudaErrorStreamCaptureUnsupported;
}

cudaError_t unsafeDuringCapture() {
  if (activeCaptures.load() == 0) return cudaSuccess;
  const cudaStreamCaptureMode mode = threadCaptureMode();
  if (mode == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  const std::thread::id me = std::this_thread::get_id();
  bool forbidden = false;
  for (auto& [c, owned] : st.captures) {
    const bool mine = c->thread == me && c->mode != cudaStreamCaptureModeRelaxed;
    const bool othersGlobal = c->thread != me && c->mode == cudaStreamCaptureModeGlobal &&
                              mode == cudaStreamCaptureModeGlobal;
    if (mine || othersGlobal) {
      c->invalidated = true;
      forbidden = true;
    }
  }
  return forbidden ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

bool captureEventRecord(Event* e, Stream* s) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto it = st.streams.find(s);
  if (it == st.streams.end()) {
    st.events.erase(e);
    return false;
  }
  st.events[e] = EventCapture{it->second.capture->id, it->second.frontier};
  return true;
}

bool captureEventWait(Stream* s, Event* e, cudaError_t* err) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto ev = st.events.find(e);
  const auto sit = st.streams.find(s);
  if (ev == st.events.end()) {
    if (sit == st.streams.end()) return false;  // an ordinary wait
    // An event of no capture, done or not, is outside the capture.
    sit->second.capture->invalidated = true;
    *err = cudaErrorStreamCaptureIsolation;
    return true;
  }
  Capture* c = captureById(st, ev->second.id);
  if (c == nullptr || (sit != st.streams.end() && sit->second.capture != c)) {
    if (sit != st.streams.end()) sit->second.capture->invalidated = true;
    *err = cudaErrorStreamCaptureIsolation;
    return true;
  }
  if (sit == st.streams.end()) {
    // The stream joins the capture, as a new branch.
    if (s->legacy()) {
      c->invalidated = true;
      *err = cudaErrorStreamCaptureImplicit;
      return true;
    }
    st.streams[s] = StreamCapture{c, c->graph->branches++, ev->second.nodes};
  } else {
    addUnique(&sit->second.frontier, ev->second.nodes);
  }
  *err = c->invalidated ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
  return true;
}

cudaError_t capturedEventUse(Event* e) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto ev = st.events.find(e);
  if (ev == st.events.end()) return cudaSuccess;
  if (Capture* c = captureById(st, ev->second.id)) c->invalidated = true;
  return cudaErrorStreamCaptureUnsupported;
}

}  // namespace fakecuda

using fakecuda::recordError;

extern "C" {

cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  fakecuda::Stream* s = fakecuda::streamOf(stream);
  if (s == nullptr) return recordError(cudaErrorInvalidResourceHandle);
  if (s->legacy()) return recordError(cudaErrorStreamCaptureUnsupported);
  fakecuda::State& st = fakecuda::state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.streams.count(s)) return recordError(cudaErrorIllegalState);
  auto c = std::make_unique<fakecuda::Capture>();
  c->id = st.nextId++;
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  c->origin = s;
  auto g = std::make_unique<fakecuda::Graph>();
  c->graph = g.get();
  st.graphs[g.get()] = std::move(g);
  st.streams[s] = fakecuda::StreamCapture{c.get(), 0, {}};
  st.captures[c.get()] = std::move(c);
  fakecuda::activeCaptures.fetch_add(1);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) {
  if (pGraph == nullptr) return recordError(cudaErrorInvalidValue);
  *pGraph = nullptr;
  fakecuda::Stream* s = fakecuda::streamOf(stream);
  if (s == nullptr) return recordError(cudaErrorInvalidResourceHandle);
  fakecuda::State& st = fakecuda::state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto it = st.streams.find(s);
  if (it == st.streams.end()) return recordError(cudaErrorIllegalState);
  fakecuda::Capture* c = it->second.capture;
  if (c->origin != s) return recordError(cudaErrorStreamCaptureUnmatched);
  if (c->mode != cudaStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id())
    return recordError(cudaErrorStreamCaptureWrongThread);
  // Every joined stream's last nodes must be among what the origin's depend on.
  const std::set<size_t> joined = fakecuda::reach(*c->graph, it->second.frontier);
  bool unjoined = false;
  for (auto& [other, sc] : st.streams)
    if (sc.capture == c && other != s)
      for (size_t n : sc.frontier) unjoined = unjoined || joined.count(n) == 0;
  const bool invalidated = c->invalidated;
  for (auto i = st.streams.begin(); i != st.streams.end();) i = i->second.capture == c ? st.streams.erase(i) : ++i;
  fakecuda::Graph* graph = c->graph;
  st.captures.erase(c);
  fakecuda::activeCaptures.fetch_sub(1);
  if (invalidated || unjoined) {
    for (auto& [o, n] : graph->objects) fakecuda::releaseLocked(st, o, n, {});
    st.graphs.erase(graph);
    return recordError(invalidated ? cudaErrorStreamCaptureInvalidated : cudaErrorStreamCaptureUnjoined);
  }
  *pGraph = reinterpret_cast<cudaGraph_t>(graph);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* captureStatus_out,
                                               unsigned long long* id_out, cudaGraph_t* graph_out,
                                               const cudaGraphNode_t** dependencies_out,
                                               const cudaGraphEdgeData** edgeData_out, size_t* numDependencies_out) {
  if (captureStatus_out == nullptr) return recordError(cudaErrorInvalidValue);
  fakecuda::noteCaptureQuery();
  fakecuda::Stream* s = fakecuda::streamOf(stream);
  if (s == nullptr) return recordError(cudaErrorInvalidResourceHandle);
  fakecuda::State& st = fakecuda::state();
  std::lock_guard<std::mutex> lock(st.mu);
  // Asking about the legacy stream while a blocking stream captures is the
  // implicit synchronisation CUDA refuses.
  if (s->legacy() && fakecuda::blockingCapturesLocked(st)) return recordError(cudaErrorStreamCaptureImplicit);
  const auto it = st.streams.find(s);
  *captureStatus_out = cudaStreamCaptureStatusNone;
  if (id_out) *id_out = 0;
  if (graph_out) *graph_out = nullptr;
  if (dependencies_out) *dependencies_out = nullptr;
  if (edgeData_out) *edgeData_out = nullptr;
  if (numDependencies_out) *numDependencies_out = 0;
  if (it == st.streams.end()) return cudaSuccess;
  const fakecuda::Capture* c = it->second.capture;
  *captureStatus_out = c->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  if (id_out) *id_out = c->id;
  if (graph_out) *graph_out = reinterpret_cast<cudaGraph_t>(c->graph);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  return cudaStreamGetCaptureInfo(stream, status, nullptr, nullptr, nullptr, nullptr, nullptr);
}

cudaError_t CUDARTAPI cudaGraphInstantiateWithFlags(cudaGraphExec_t* pExec, cudaGraph_t graph,
                                                    unsigned long long flags) {
  if (pExec == nullptr || flags != 0) return recordError(cudaErrorInvalidValue);
  fakecuda::State& st = fakecuda::state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto it = st.graphs.find(reinterpret_cast<fakecuda::Graph*>(graph));
  if (it == st.graphs.end()) return recordError(cudaErrorInvalidValue);
  auto e = std::make_unique<fakecuda::Exec>();
  e->nodes = it->second->nodes;
  for (size_t b = 0; b < it->second->branches; ++b) e->branches.push_back(fakecuda::Device::get().createStream(0, false));
  // An executable graph holds its own references to the graph's user objects.
  e->objects = it->second->objects;
  for (auto& [o, n] : e->objects) o->refs += n;
  *pExec = reinterpret_cast<cudaGraphExec_t>(e.get());
  st.execs[e.get()] = std::move(e);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  fakecuda::Stream* s = fakecuda::streamOf(stream);
  if (s == nullptr) return recordError(cudaErrorInvalidResourceHandle);
  if (fakecuda::streamCaptures(s)) return recordError(cudaErrorStreamCaptureUnsupported);  // child graphs: not emulated
  if (s->legacy()) {
    const cudaError_t err = fakecuda::legacyDuringCapture();
    if (err != cudaSuccess) return recordError(err);
  }
  fakecuda::State& st = fakecuda::state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto it = st.execs.find(reinterpret_cast<fakecuda::Exec*>(graphExec));
  if (it == st.execs.end()) return recordError(cudaErrorInvalidValue);
  fakecuda::Exec& e = *it->second;
  // Fork: every node waits for the launch stream's work before it (and for
  // this exec's previous launch, which the branches' order gives).
  fakecuda::Device::get().enqueue(s, nullptr);  // the legacy stream's implicit order, if it is that
  const fakecuda::Position start = s->end();
  std::vector<fakecuda::Position> ends(e.nodes.size());
  for (size_t i = 0; i < e.nodes.size(); ++i) {
    std::vector<fakecuda::Position> after{start};
    for (size_t d : e.nodes[i].deps) after.push_back(ends[d]);
    fakecuda::Stream* b = e.branches[e.nodes[i].branch];
    b->push(e.nodes[i].work, std::move(after));
    ends[i] = b->end();
  }
  // Join: the launch stream goes on once every branch has.
  std::vector<fakecuda::Position> join;
  for (fakecuda::Stream* b : e.branches) join.push_back(b->end());
  s->push(nullptr, join);
  e.lastLaunch = {s->end()};
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph) {
  fakecuda::State& st = fakecuda::state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto it = st.graphs.find(reinterpret_cast<fakecuda::Graph*>(graph));
  if (it == st.graphs.end()) return recordError(cudaErrorInvalidValue);
  for (auto& [c, owned] : st.captures)
    if (c->graph == it->first) return recordError(cudaErrorIllegalState);  // still being captured
  for (auto& [o, n] : it->second->objects) fakecuda::releaseLocked(st, o, n, {});
  st.graphs.erase(it);
  return cudaSuccess;
}

// Its references go once its launches have ended, as CUDA releases them.
cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  fakecuda::State& st = fakecuda::state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto it = st.execs.find(reinterpret_cast<fakecuda::Exec*>(graphExec));
  if (it == st.execs.end()) return recordError(cudaErrorInvalidValue);
  for (auto& [o, n] : it->second->objects) fakecuda::releaseLocked(st, o, n, it->second->lastLaunch);
  for (fakecuda::Stream* b : it->second->branches) fakecuda::Device::get().destroyStream(b);
  st.execs.erase(it);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaUserObjectCreate(cudaUserObject_t* object_out, void* ptr, cudaHostFn_t destroy,
                                           unsigned int initialRefcount, unsigned int flags) {
  if (object_out == nullptr || destroy == nullptr || initialRefcount == 0 || flags != cudaUserObjectNoDestructorSync)
    return recordError(cudaErrorInvalidValue);
  fakecuda::State& st = fakecuda::state();
  std::lock_guard<std::mutex> lock(st.mu);
  auto o = std::make_unique<fakecuda::UserObject>();
  o->ptr = ptr;
  o->destroy = destroy;
  o->refs = initialRefcount;
  *object_out = reinterpret_cast<cudaUserObject_t>(o.get());
  st.objects[o.get()] = std::move(o);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count,
                                                unsigned int flags) {
  fakecuda::State& st = fakecuda::state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto g = st.graphs.find(reinterpret_cast<fakecuda::Graph*>(graph));
  const auto o = st.objects.find(reinterpret_cast<fakecuda::UserObject*>(object));
  if (g == st.graphs.end() || o == st.objects.end() || count == 0) return recordError(cudaErrorInvalidValue);
  // Move: the graph takes the caller's references; else it adds its own.
  if ((flags & cudaGraphUserObjectMove) == 0) o->second->refs += count;
  g->second->objects.emplace_back(o->first, count);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaUserObjectRelease(cudaUserObject_t object, unsigned int count) {
  fakecuda::State& st = fakecuda::state();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto o = st.objects.find(reinterpret_cast<fakecuda::UserObject*>(object));
  if (o == st.objects.end() || count == 0) return recordError(cudaErrorInvalidValue);
  fakecuda::releaseLocked(st, o->first, count, {});
  return cudaSuccess;
}

}  // extern "C"
