// Pinned host memory for the staged device path, kept per communicator and
// reused: cudaHostAlloc is far too slow to pay on every call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "base/result.h"

namespace braid::device {

struct PinnedBlock {
  char* data = nullptr;
  size_t bytes = 0;  // capacity: a power of two
};

class StagingPool {
 public:
  StagingPool() = default;
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // Allocates `count` blocks of each size class from `from` up to `upTo`
  // bytes: made with the communicator's first device work, before any of its
  // launches, so that common calls never allocate while kernels run
  // (cudaHostAlloc may wait for the whole device).
  Result reserve(size_t from, size_t upTo, size_t count);
  // A free block of at least `bytes` (its size class, else a larger one),
  // without allocating; false when there is none.
  bool take(size_t bytes, PinnedBlock* out);
  // A new block of at least `bytes` (cudaHostAlloc).
  Result grow(size_t bytes, PinnedBlock* out);
  // Only once no copy and no host work uses it any more.
  void release(const PinnedBlock& block);
  // A block something may still use: never reused nor freed (with a warning).
  void abandon(const PinnedBlock& block);
  // The same without a warning: the caller says why, once.
  void leak(const PinnedBlock& block);
  // Every block, the reserve included: a kernel that may still run when the
  // communicator goes (a graph's launch) may still use them.
  void leakAll();

 private:
  Result allocate(size_t cls, PinnedBlock* out);  // a new block of that class

  std::mutex mu_;
  std::map<size_t, std::vector<char*>> free_;  // by capacity
  std::vector<char*> all_;                     // freed at destruction
};

// Words of mapped pinned memory that stream-wait kernels read: the last
// published job sequence of calls issued outside graphs, the last published
// ticket of graph launches (kernels/README.md: two counters, as the two kinds
// of jobs reach the proxy in different orders), and the abort word.
class MappedWords {
 public:
  MappedWords() = default;
  ~MappedWords();
  MappedWords(const MappedWords&) = delete;
  MappedWords& operator=(const MappedWords&) = delete;

  Result allocate();
  void publish(uint64_t sequence);
  void publishLaunch(uint64_t ticket);
  uint64_t launchPublished() const;  // the host's view
  void setAbort();
  bool aborted() const;
  // The worst status a device lane ended with since the last take (0: none);
  // plan kernels raise it (BRAID_DEVICE_ENGINE=kernels).
  uint32_t takeLaneFailure() const;
  void leak() { host_ = nullptr; }  // a kernel may still read them
  const volatile uint64_t* devicePublished() const { return devicePublished_; }
  const volatile uint64_t* deviceLaunchPublished() const { return deviceLaunchPublished_; }
  const volatile uint32_t* deviceAbort() const { return deviceAbort_; }
  uint32_t* deviceLaneFailure() const { return deviceLaneFailure_; }

 private:
  struct Words {
    uint64_t published;
    uint64_t launchPublished;
    uint32_t abort;
    uint32_t laneFailure;
  };
  Words* host_ = nullptr;
  const volatile uint64_t* devicePublished_ = nullptr;
  const volatile uint64_t* deviceLaunchPublished_ = nullptr;
  const volatile uint32_t* deviceAbort_ = nullptr;
  uint32_t* deviceLaneFailure_ = nullptr;
};

// One 8-byte word of mapped pinned memory.
struct MappedSlot {
  uint64_t* host = nullptr;
  const volatile uint64_t* device = nullptr;
};

// Words of mapped pinned memory handed out one at a time and reused: the
// ticket word of each captured call (graph launches write the ticket there,
// the stream-wait kernel of the launch reads it).
class MappedSlots {
 public:
  MappedSlots() = default;
  ~MappedSlots();
  MappedSlots(const MappedSlots&) = delete;
  MappedSlots& operator=(const MappedSlots&) = delete;

  // A first chunk of slots (512), made before any kernel may wait: a later
  // chunk's cudaHostAlloc may wait for the device.
  Result reserve();
  // A slot holding 0.
  Result acquire(MappedSlot* out);
  // Only once no kernel and no graph launch may use it any more.
  void release(const MappedSlot& slot);
  // A kernel may still read some slot: nothing is freed.
  void leak();

 private:
  Result addChunkLocked();

  std::mutex mu_;
  std::vector<void*> chunks_;  // freed at destruction
  std::vector<MappedSlot> free_;
};

// The beacons of the plan kernels' lanes (executor::LaneBeacon), in one block of
// mapped pinned memory made when the communicator's device work starts, so
// that a launch allocates nothing: a launch takes a run of them, returned once
// its kernel is done and its watch has seen every lane end. Host and device
// see the block at the same address (UVA).
struct BeaconRange {
  size_t first = 0;
  size_t count = 0;
};

// Which beacons are taken; shared with the leases, which may outlive the
// communicator's MappedBeacons.
struct BeaconSlots {
  std::mutex mu;
  std::vector<bool> busy;
};

// A taken run of beacons, returned when its last holder drops it: the
// launch's inflight job (its kernel ended) and the watch that reads the
// beacons (it saw every lane end). Returned at the job's end alone, the run
// was taken and zeroed by the next launch while the watch still read it as
// the old launch's lanes (an out-of-range step: a crash on the fake runtime).
class BeaconLease {
 public:
  BeaconLease(std::shared_ptr<BeaconSlots> slots, BeaconRange range)
      : slots_(std::move(slots)), range_(range) {}
  ~BeaconLease();
  BeaconLease(const BeaconLease&) = delete;
  BeaconLease& operator=(const BeaconLease&) = delete;
  const BeaconRange& range() const { return range_; }

 private:
  std::shared_ptr<BeaconSlots> slots_;
  BeaconRange range_;
};

class MappedBeacons {
 public:
  MappedBeacons() = default;
  ~MappedBeacons();
  MappedBeacons(const MappedBeacons&) = delete;
  MappedBeacons& operator=(const MappedBeacons&) = delete;

  // Enough for `capacity` lanes of launches in flight at once; made before
  // any launch because cudaHostAlloc may wait for every running kernel.
  Result allocate(size_t capacity);
  size_t capacity() const { return capacity_; }
  // `count` zeroed beacons, or false when that many are not free in a run
  // (the launch then runs unwatched; the caller says so).
  bool take(size_t count, std::shared_ptr<BeaconLease>* out);
  // True the first time a launch found too few free: the caller warns once.
  bool firstShortage() { return !shortSeen_.exchange(true); }
  void* at(size_t index) const;  // a beacon's address, host and device alike
  void leak() { block_ = nullptr; }  // a kernel may still write them

 private:
  std::shared_ptr<BeaconSlots> slots_ = std::make_shared<BeaconSlots>();
  char* block_ = nullptr;
  size_t capacity_ = 0;
  std::atomic<bool> shortSeen_{false};
};

}  // namespace braid::device
