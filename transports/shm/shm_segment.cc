#include "transports/shm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <nccl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "base/log.h"
#include "base/unique_fd.h"
#include "transports/common/connect_util.h"

namespace braid::shm {

ShmMapping& ShmMapping::operator=(ShmMapping&& o) noexcept {
  if (this != &o) {
    reset();
    addr_ = std::exchange(o.addr_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void ShmMapping::reset() {
  if (addr_) munmap(addr_, size_);
  addr_ = nullptr;
  size_ = 0;
}

ShmName& ShmName::operator=(ShmName&& o) noexcept {
  if (this != &o) {
    unlink();
    name_ = std::exchange(o.name_, std::string());
  }
  return *this;
}

void ShmName::unlink() {
  if (name_.empty()) return;
  if (shm_unlink(name_.c_str()) != 0 && errno != ENOENT)
    BRAID_WARN("cannot remove shared memory segment /dev/shm%s: %s", name_.c_str(),
               strerror(errno));
  name_.clear();
}

namespace {

// MAP_POPULATE: every page is mapped now rather than at its first touch. A
// FIFO's sender opens the segment its receiver wrote, and touched each of its
// eight slots for the first time in one of the first eight calls on it: a
// page fault apiece inside calls a program times (4 ranks, 8 B: 4-8 faults
// in the first two timed calls; performance.md, 2026-12-02, fifth session).
// The pages exist already (posix_fallocate at creation), so this maps them
// and allocates nothing.
Result mapFd(int fd, size_t bytes, const std::string& name, const std::string& purpose,
             ShmMapping* mapping) {
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (addr == MAP_FAILED)
    return systemFail("cannot map %zu bytes of shared memory segment /dev/shm%s for %s", bytes,
                      name.c_str(), purpose.c_str());
  *mapping = ShmMapping(addr, bytes);
  return Result::success();
}

std::string freeSpaceOfDevShm() {
  struct statvfs st;
  if (statvfs("/dev/shm", &st) != 0) return "unknown";
  return std::to_string(static_cast<unsigned long long>(st.f_bavail) * st.f_frsize) + " of " +
         std::to_string(static_cast<unsigned long long>(st.f_blocks) * st.f_frsize);
}

}  // namespace

void removeSegmentsOfProcess(int pid) {
  DIR* dir = opendir("/dev/shm");
  if (!dir) return;
  const std::string prefix = "braid-" + std::to_string(pid) + "-";
  while (dirent* e = readdir(dir)) {
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    if (shm_unlink(("/" + std::string(e->d_name)).c_str()) == 0)
      BRAID_INFO(kLogShm, "removed /dev/shm/%s left by dead process %d", e->d_name, pid);
  }
  closedir(dir);
}

Result createShmSegment(size_t bytes, const std::string& purpose, ShmName* name,
                        ShmMapping* mapping) {
  char buf[64];
  UniqueFd fd;
  for (int attempt = 0; attempt < 8 && !fd.valid(); ++attempt) {
    snprintf(buf, sizeof(buf), "/braid-%d-%016" PRIx64, static_cast<int>(getpid()), common::randomU64());
    fd.reset(shm_open(buf, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
    if (!fd.valid() && errno != EEXIST)
      return systemFail("cannot create shared memory segment /dev/shm%s for %s", buf,
                        purpose.c_str());
  }
  if (!fd.valid())
    return fail(ncclSystemError, "cannot find a free shared memory segment name for %s",
                purpose.c_str());
  ShmName owned(buf);  // from here on the name is removed on any failure

  if (ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0)
    return systemFail("cannot size shared memory segment /dev/shm%s to %zu bytes for %s", buf,
                      bytes, purpose.c_str());
  // ftruncate only sets the size; reserving every page now is what turns a
  // full /dev/shm into an error here instead of a SIGBUS on first touch.
  int err = posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes));
  if (err == ENOSPC || err == EFBIG)
    return fail(ncclSystemError,
                "/dev/shm is too small: %zu bytes were needed for the shared memory FIFO of %s, "
                "but /dev/shm has %s bytes free. Enlarge it (e.g. docker run --shm-size=1g, or "
                "mount -o remount,size=... /dev/shm), reduce NCCL_BUFFSIZE, or set "
                "NCCL_SHM_DISABLE=1 to use the network transport instead",
                bytes, purpose.c_str(), freeSpaceOfDevShm().c_str());
  if (err != 0 && err != EOPNOTSUPP && err != EINVAL) {
    errno = err;
    return systemFail("cannot reserve %zu bytes for shared memory segment /dev/shm%s for %s",
                      bytes, buf, purpose.c_str());
  }
  BRAID_TRY(mapFd(fd.get(), bytes, buf, purpose, mapping));
  *name = std::move(owned);
  return Result::success();
}

Result openShmSegment(const std::string& name, size_t bytes, const std::string& purpose,
                      ShmMapping* mapping) {
  UniqueFd fd(shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd.valid()) {
    if (errno == ENOENT)
      return fail(ncclRemoteError, "shared memory segment /dev/shm%s of %s no longer exists: "
                  "the receiving rank gave up or died before this rank attached",
                  name.c_str(), purpose.c_str());
    return systemFail("cannot open shared memory segment /dev/shm%s of %s", name.c_str(),
                      purpose.c_str());
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0)
    return systemFail("cannot stat shared memory segment /dev/shm%s of %s", name.c_str(),
                      purpose.c_str());
  if (static_cast<size_t>(st.st_size) != bytes)
    return fail(ncclInternalError, "shared memory segment /dev/shm%s of %s has %lld bytes, "
                "expected %zu", name.c_str(), purpose.c_str(),
                static_cast<long long>(st.st_size), bytes);
  return mapFd(fd.get(), bytes, name, purpose, mapping);
}

}  // namespace braid::shm
