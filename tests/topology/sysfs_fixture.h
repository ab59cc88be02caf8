// A throw-away sysfs tree in a temporary directory, for topology tests.
#pragma once

#include <string>

namespace braid {
namespace topology {
namespace testing {

class SysfsFixture {
 public:
  SysfsFixture();
  ~SysfsFixture();
  SysfsFixture(const SysfsFixture&) = delete;
  SysfsFixture& operator=(const SysfsFixture&) = delete;

  const std::string& root() const { return root_; }
  // Writes `content` + "\n" to root/relPath, creating directories.
  void write(const std::string& relPath, const std::string& content);
  void mkdir(const std::string& relPath);
  // root/relPath -> target (target relative to the link's directory, as sysfs does).
  void symlink(const std::string& relPath, const std::string& target);

  // A PCI function under devices/<parentChain>/<busId> with its bus/pci/devices link.
  void addPci(const std::string& chain, const std::string& vendor, const std::string& cls,
              int numaNode);

 private:
  std::string root_;
};

// Two sockets of 4 CPUs (2 cores x 2 threads), two NUMA nodes, two NVIDIA GPUs
// (one per socket), an Intel Ethernet NIC, a Mellanox IB HCA with an active port,
// a second HCA with its port down, and some PCI devices braid ignores.
void buildTwoSocketMachine(SysfsFixture* fx);

}  // namespace testing
}  // namespace topology
}  // namespace braid
