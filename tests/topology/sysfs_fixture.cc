#include "sysfs_fixture.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace braid {
namespace topology {
namespace testing {

namespace fs = std::filesystem;

SysfsFixture::SysfsFixture() {
  std::string tmpl = (fs::temp_directory_path() / "braid-sysfs-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  root_ = tmpl;
}

SysfsFixture::~SysfsFixture() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

void SysfsFixture::mkdir(const std::string& relPath) { fs::create_directories(root_ + "/" + relPath); }

void SysfsFixture::write(const std::string& relPath, const std::string& content) {
  fs::path p = fs::path(root_) / relPath;
  fs::create_directories(p.parent_path());
  std::ofstream(p) << content << "\n";
}

void SysfsFixture::symlink(const std::string& relPath, const std::string& target) {
  fs::path p = fs::path(root_) / relPath;
  fs::create_directories(p.parent_path());
  fs::create_symlink(target, p);
}

void SysfsFixture::addPci(const std::string& chain, const std::string& vendor,
                          const std::string& cls, int numaNode) {
  const std::string dir = "devices/" + chain;
  const std::string busId = fs::path(chain).filename().string();
  write(dir + "/vendor", vendor);
  write(dir + "/device", "0x1234");
  write(dir + "/class", cls);
  write(dir + "/numa_node", std::to_string(numaNode));
  symlink("bus/pci/devices/" + busId, "../../../" + dir);
}

void buildTwoSocketMachine(SysfsFixture* fx) {
  fx->write("devices/system/cpu/online", "0-7");
  fx->write("devices/system/cpu/possible", "0-15");
  for (int c = 0; c < 8; ++c) {
    const std::string t = "devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
    fx->write(t + "physical_package_id", std::to_string(c / 4));
    fx->write(t + "core_id", std::to_string(c % 2));
  }
  fx->mkdir("devices/system/cpu/cpufreq");
  const std::string node = "devices/system/node/";
  fx->write(node + "online", "0-1");
  fx->write(node + "has_cpu", "0-1");
  fx->write(node + "node0/cpulist", "0-3");
  fx->write(node + "node0/distance", "10 21");
  fx->write(node + "node1/cpulist", "4-7");
  fx->write(node + "node1/distance", "21 10");

  fx->addPci("pci0000:00/0000:00:00.0", "0x8086", "0x060000", 0);  // host bridge
  fx->addPci("pci0000:00/0000:00:01.0", "0x8086", "0x060400", 0);  // PCI bridge
  fx->addPci("pci0000:00/0000:00:01.0/0000:3b:00.0", "0x10de", "0x030200", 0);  // GPU
  fx->addPci("pci0000:00/0000:00:01.0/0000:3c:00.0", "0x15b3", "0x020700", 0);  // IB HCA
  fx->addPci("pci0000:00/0000:00:03.0", "0x8086", "0x020000", 0);               // Ethernet
  fx->addPci("pci0000:80/0000:80:01.0", "0x8086", "0x060400", 1);
  fx->addPci("pci0000:80/0000:80:01.0/0000:af:00.0", "0x10de", "0x030000", 1);  // GPU (VGA)
  fx->addPci("pci0000:80/0000:80:01.0/0000:b0:00.0", "0x15b3", "0x020700", 1);  // IB HCA, down
  fx->addPci("pci0000:80/0000:80:02.0", "0x1a03", "0x030000", 1);  // BMC VGA: not NVIDIA

  const std::string net = "class/net/";
  fx->symlink(net + "eth0/device", "../../../devices/pci0000:00/0000:00:03.0");
  fx->write(net + "eth0/speed", "25000");
  fx->write(net + "eth0/flags", "0x1003");
  fx->write(net + "eth0/operstate", "up");
  fx->symlink(net + "ib0/device", "../../../devices/pci0000:00/0000:00:01.0/0000:3c:00.0");
  fx->write(net + "ib0/speed", "100000");
  fx->write(net + "ib0/flags", "0x1003");
  fx->write(net + "ib0/operstate", "up");
  fx->write(net + "eth1/speed", "-1");
  fx->write(net + "eth1/flags", "0x1002");
  fx->write(net + "eth1/operstate", "down");
  fx->write(net + "lo/flags", "0x9");
  fx->write(net + "lo/operstate", "unknown");

  const std::string ib = "class/infiniband/";
  fx->symlink(ib + "mlx5_0/device", "../../../devices/pci0000:00/0000:00:01.0/0000:3c:00.0");
  fx->write(ib + "mlx5_0/ports/1/state", "4: ACTIVE");
  fx->write(ib + "mlx5_0/ports/1/link_layer", "InfiniBand");
  fx->write(ib + "mlx5_0/ports/1/rate", "100 Gb/sec (4X EDR)");
  fx->symlink(ib + "mlx5_1/device", "../../../devices/pci0000:80/0000:80:01.0/0000:b0:00.0");
  fx->write(ib + "mlx5_1/ports/1/state", "1: DOWN");
  fx->write(ib + "mlx5_1/ports/1/link_layer", "Ethernet");
}

}  // namespace testing
}  // namespace topology
}  // namespace braid
