// Environment variables set for a scope of a test, then put back.
#ifndef BRAID_TESTS_COMMON_SCOPED_ENV_H_
#define BRAID_TESTS_COMMON_SCOPED_ENV_H_

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace braidtest {

// Sets variables for the life of the object, then puts back what was there.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::vector<std::pair<std::string, std::string>>& vars) {
    for (const auto& kv : vars) {
      const char* old = std::getenv(kv.first.c_str());
      saved_.push_back({kv.first, old != nullptr, old ? old : ""});
      setenv(kv.first.c_str(), kv.second.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->wasSet) setenv(it->name.c_str(), it->value.c_str(), 1);
      else unsetenv(it->name.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  struct Saved {
    std::string name;
    bool wasSet;
    std::string value;
  };
  std::vector<Saved> saved_;
};

}  // namespace braidtest

#endif  // BRAID_TESTS_COMMON_SCOPED_ENV_H_
