// A T in an anonymous shared mapping: made before forking, it is seen and
// written by the test process and every forked rank alike.
#ifndef BRAID_TESTS_COMMON_SHARED_PAGE_H_
#define BRAID_TESTS_COMMON_SHARED_PAGE_H_

#include <sys/mman.h>

#include <new>

namespace testshm {

template <class T>
class SharedPage {
 public:
  SharedPage() {
    void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    page_ = p == MAP_FAILED ? nullptr : new (p) T{};
  }
  ~SharedPage() {
    if (page_) munmap(page_, sizeof(T));
  }
  SharedPage(const SharedPage&) = delete;
  SharedPage& operator=(const SharedPage&) = delete;
  T* get() const { return page_; }

 private:
  T* page_ = nullptr;
};

}  // namespace testshm

#endif  // BRAID_TESTS_COMMON_SHARED_PAGE_H_
