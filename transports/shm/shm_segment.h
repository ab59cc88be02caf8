// POSIX shared-memory segments in /dev/shm, owned RAII-style: the mapping is
// unmapped and the name unlinked when their owners go away.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "base/result.h"

namespace braid::shm {

// A shared mapping of `size()` bytes; munmap on destruction.
class ShmMapping {
 public:
  ShmMapping() = default;
  ShmMapping(void* addr, size_t size) : addr_(addr), size_(size) {}
  ShmMapping(ShmMapping&& o) noexcept
      : addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  ShmMapping& operator=(ShmMapping&& o) noexcept;
  ShmMapping(const ShmMapping&) = delete;
  ShmMapping& operator=(const ShmMapping&) = delete;
  ~ShmMapping() { reset(); }

  void* data() const { return addr_; }
  size_t size() const { return size_; }
  void reset();

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

// The name of a segment this process created; unlinked once, at the latest on
// destruction, so /dev/shm keeps nothing after the peer attached or we failed.
class ShmName {
 public:
  ShmName() = default;
  explicit ShmName(std::string name) : name_(std::move(name)) {}
  ShmName(ShmName&& o) noexcept : name_(std::exchange(o.name_, std::string())) {}
  ShmName& operator=(ShmName&& o) noexcept;
  ShmName(const ShmName&) = delete;
  ShmName& operator=(const ShmName&) = delete;
  ~ShmName() { unlink(); }

  const std::string& str() const { return name_; }
  void unlink();

 private:
  std::string name_;
};

// Creates "/braid-<pid>-<random>" of `bytes` bytes with every page reserved up
// front, and maps it. `purpose` names the connection in errors; a /dev/shm too
// small for the segment fails here with the size needed, never later with SIGBUS.
Result createShmSegment(size_t bytes, const std::string& purpose, ShmName* name,
                        ShmMapping* mapping);

// Maps an existing segment created by another process; its size must be `bytes`.
// Unlinks every segment a process with this pid created (names carry the
// creator's pid); for processes known to be dead.
void removeSegmentsOfProcess(int pid);

Result openShmSegment(const std::string& name, size_t bytes, const std::string& purpose,
                      ShmMapping* mapping);

}  // namespace braid::shm
