// The emulated device behind the fake CUDA runtime: streams as ordered work
// queues (one worker thread each), events as positions in a stream, and a
// registry of the memory CUDA "allocated" (host memory, so that kernels
// emulated on host threads use the same addresses the host code computed).
#pragma once

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace fakecuda {

class Stream;

// "Stream s has completed its first `count` items": what an event records and
// what stream-ordered waits depend on.
struct Position {
  Stream* stream = nullptr;
  uint64_t count = 0;
  bool reached() const;
};

class Stream {
 public:
  Stream(int device, bool blocking, bool legacy);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Appends work that starts once every position in `after` is reached.
  void push(std::function<void()> work, std::vector<Position> after);
  Position end();                 // the position after everything enqueued so far
  bool idle();                    // everything enqueued has run
  void waitFor(uint64_t count);   // until `count` items have run
  void retire();                  // cudaStreamDestroy: the worker ends once the queue is empty

  int device() const { return device_; }
  uint64_t id() const { return id_; }  // cudaStreamGetId: never reused in the process
  bool blocking() const { return blocking_; }
  bool legacy() const { return legacy_; }

 private:
  struct Item {
    std::function<void()> work;
    std::vector<Position> after;
  };
  void serve();
  friend struct Position;

  const int device_;
  const uint64_t id_;
  const bool blocking_;
  const bool legacy_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  bool retired_ = false;
  std::thread worker_;
};

struct Event {
  Position at;  // count 0 with no stream: never recorded, complete
};

enum class MemKind { Device, Pinned };

struct Allocation {
  size_t bytes = 0;
  MemKind kind = MemKind::Device;
  int device = 0;
  bool mapped = false;  // pinned memory the device may address (mapped or portable)
};

// The one emulated machine of the process.
class Device {
 public:
  static Device& get();

  int count() const { return count_; }

  // Streams: created, looked up by handle (nullptr and cudaStreamLegacy are
  // the legacy default stream), never freed (events may still name them).
  Stream* createStream(int device, bool blocking);
  Stream* lookup(cudaStream_t handle, bool* known);
  void destroyStream(Stream* s);
  // Stream order of work enqueued on `s`, with the legacy stream's implicit
  // synchronisation with blocking streams.
  void enqueue(Stream* s, std::function<void()> work, std::vector<Position> after = {});
  void synchronize();  // every stream's work so far has run
  bool anyBusy();
  // Bytes of live allocations of `kind`.
  uint64_t bytesInUse(MemKind kind);

  // Memory: registered host memory.
  void* allocate(size_t bytes, MemKind kind, int device, bool mapped);
  // Unregisters; the memory itself is freed now, or kept until exit when
  // `keep` (work still running may touch it).
  bool release(void* p, MemKind kind, bool keep);
  bool find(const void* p, uintptr_t* base, Allocation* out);

 private:
  template <class T>
  friend T& immortal();  // the one instance, never destroyed (immortal.h)
  Device();
  int count_ = 1;
  std::mutex mu_;
  Stream* legacy_ = nullptr;
  std::vector<std::unique_ptr<Stream>> streams_;  // every stream ever made
  std::vector<Stream*> live_;
  std::map<uintptr_t, Allocation> memory_;
  std::vector<void*> kept_;
};

}  // namespace fakecuda
