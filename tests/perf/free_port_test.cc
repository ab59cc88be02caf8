// braidrun's choice of rank 0's bootstrap port: outside the kernel's
// ephemeral range (where any process's outgoing connection may take it
// before rank 0 binds it), and never a port that is in use.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "braidrun/free_port.h"

namespace braid::run {
namespace {

constexpr const char* kLoopback = "127.0.0.1";

// A socket listening on a port of the loopback address while it lives.
class Listener {
 public:
  explicit Listener(int port) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, kLoopback, &sa.sin_addr);
    ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && listen(fd_, 1) == 0;
  }
  ~Listener() {
    if (fd_ >= 0) close(fd_);
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  bool ok() const { return ok_; }

 private:
  int fd_;
  bool ok_ = false;
};

// `n` consecutive ports of the range below the ephemeral one, each
// listened on; empty if no such run was found free.
std::vector<std::unique_ptr<Listener>> holdConsecutivePorts(int n, int* first) {
  const PortRange below = portsBelowEphemeral(ephemeralPorts());
  for (int base = below.first + int(getpid() % 5000); base + n <= below.last; base += n + 7) {
    std::vector<std::unique_ptr<Listener>> held;
    for (int i = 0; i < n; ++i) {
      held.push_back(std::make_unique<Listener>(base + i));
      if (!held.back()->ok()) break;
    }
    if (held.size() == size_t(n) && held.back()->ok()) {
      *first = base;
      return held;
    }
  }
  return {};
}

TEST(BraidrunPort, CandidatesLieBelowTheEphemeralRange) {
  const PortRange below = portsBelowEphemeral({32768, 60999});
  EXPECT_EQ(below.first, 10000);
  EXPECT_EQ(below.last, 32767);
  // The whole space ephemeral, or too little room left: the kernel chooses.
  EXPECT_EQ(portsBelowEphemeral({1024, 65535}).size(), 0);
  EXPECT_EQ(portsBelowEphemeral({10500, 65535}).size(), 0);
}

TEST(BraidrunPort, TheDefaultChoiceIsFreeAndNotEphemeral) {
  const PortRange ephemeral = ephemeralPorts();
  const PortRange below = portsBelowEphemeral(ephemeral);
  if (below.size() == 0) GTEST_SKIP() << "this machine's ephemeral range leaves no room below it";
  for (int i = 0; i < 20; ++i) {
    std::string error;
    const int port = pickFreePort(kLoopback, &error);
    ASSERT_NE(port, 0) << error;
    EXPECT_TRUE(port >= below.first && port <= below.last) << port;
    EXPECT_TRUE(port < ephemeral.first || port > ephemeral.last) << port;
    Listener rank0(port);
    EXPECT_TRUE(rank0.ok()) << "port " << port << " could not be listened on";
  }
}

TEST(BraidrunPort, PortsInUseAreSkipped) {
  int first = 0;
  auto held = holdConsecutivePorts(3, &first);
  if (held.empty()) GTEST_SKIP() << "found no 3 consecutive free ports to hold";
  held.pop_back();  // the third is free again
  for (int i = 0; i < 20; ++i) {  // each starts at a random candidate
    std::string error;
    EXPECT_EQ(pickFreePort(kLoopback, {first, first + 2}, &error), first + 2) << error;
  }
}

TEST(BraidrunPort, AllCandidatesInUseIsAnError) {
  int first = 0;
  auto held = holdConsecutivePorts(2, &first);
  if (held.empty()) GTEST_SKIP() << "found no 2 consecutive free ports to hold";
  std::string error;
  EXPECT_EQ(pickFreePort(kLoopback, {first, first + 1}, &error), 0);
  EXPECT_NE(error.find("are all in use"), std::string::npos) << error;
}

TEST(BraidrunPort, NoCandidatesMeansTheKernelsChoice) {
  std::string error;
  const int port = pickFreePort(kLoopback, PortRange{}, &error);
  ASSERT_NE(port, 0) << error;
  const PortRange ephemeral = ephemeralPorts();
  EXPECT_TRUE(port >= ephemeral.first && port <= ephemeral.last) << port;
  std::string bad;
  EXPECT_EQ(pickFreePort("not-an-address", PortRange{}, &bad), 0);
  EXPECT_NE(bad.find("not an IPv4 address"), std::string::npos) << bad;
}

}  // namespace
}  // namespace braid::run
