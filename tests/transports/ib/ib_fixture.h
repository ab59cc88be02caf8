// A fake /sys tree in a temporary directory, for the sysfs scanner and probe.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace braid {
namespace ib {

class SysfsFixture {
 public:
  SysfsFixture() {
    char tmpl[] = "/tmp/braid-ib-sysfs-XXXXXX";
    const char* d = mkdtemp(tmpl);
    EXPECT_NE(d, nullptr);
    root_ = d ? d : "/nonexistent";
  }
  ~SysfsFixture() { std::system(("rm -rf '" + root_ + "'").c_str()); }
  const std::string& root() const { return root_; }

  // Writes <root>/class/infiniband/<dev>/ports/<port>/<rel> = text, making folders.
  void write(const std::string& dev, int port, const std::string& rel, const std::string& text) {
    const std::string path =
        root_ + "/class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/" + rel;
    for (size_t i = root_.size() + 1; i < path.size(); ++i)
      if (path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
    std::ofstream(path) << text << "\n";
  }
  void addPort(const std::string& dev, int port, const std::string& state, const std::string& link) {
    write(dev, port, "state", state);
    write(dev, port, "link_layer", link);
  }

 private:
  std::string root_;
};

}  // namespace ib
}  // namespace braid
