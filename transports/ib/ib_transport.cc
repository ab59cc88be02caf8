#include "transports/ib/ib_transport.h"

#include <mutex>
#include <string>

#include "core/log.h"

namespace braid {

namespace {

std::string describePorts(const std::vector<ib::PortDesc>& ports) {
  std::string s;
  for (const auto& p : ports) {
    if (!s.empty()) s += ",";
    s += p.device + ":" + std::to_string(p.port) +
         (p.linkLayer == ib::LinkLayer::InfiniBand ? "/IB" : "/RoCE");
  }
  return s;
}

class IbTransport : public Transport {
 public:
  explicit IbTransport(std::shared_ptr<const ib::IbProbeResult> probe) : probe_(std::move(probe)) {}
  const char* name() const override { return "ib"; }

  bool canConnect(const PeerInfo&, const PeerInfo&) const override {
    return ibDataPathReady() && probe_->usable;
  }

  Result listen(const ConnectRequest&, std::unique_ptr<RecvEndpoint>*) override {
    return notReady();
  }
  Result connect(const ConnectRequest&, const Blob&, std::unique_ptr<SendConnection>*) override {
    return notReady();
  }

 private:
  static Result notReady() {
    return fail(ncclInternalError,
                "the ib transport has no data path in this build; canConnect should have "
                "chosen another transport");
  }
  std::shared_ptr<const ib::IbProbeResult> probe_;
};

void logProbe(const ib::IbProbeResult& p) {
  if (!p.usable) {
    BRAID_INFO(kLogNet | kLogInit, "NET/IB: no InfiniBand/RoCE device; using TCP (%s)",
               p.reason.c_str());
  } else if (!ibDataPathReady()) {
    BRAID_INFO(kLogNet | kLogInit,
               "NET/IB: found %s, but this braid has no IB data path yet; using TCP",
               describePorts(p.ports).c_str());
  } else {
    BRAID_INFO(kLogNet | kLogInit, "NET/IB: using %s", describePorts(p.ports).c_str());
  }
}

}  // namespace

bool ibDataPathReady() { return false; }

std::unique_ptr<Transport> makeIbTransport(ib::IbProbeResult probe) {
  return std::make_unique<IbTransport>(std::make_shared<const ib::IbProbeResult>(std::move(probe)));
}

std::unique_ptr<Transport> makeIbTransport() {
  // One probe per process: every communicator would otherwise dlopen and log again.
  static std::once_flag once;
  static std::shared_ptr<const ib::IbProbeResult> probe;
  std::call_once(once, [] {
    probe = std::make_shared<const ib::IbProbeResult>(ib::probeIb(ib::ibProbeOptionsFromEnv()));
    logProbe(*probe);
  });
  return std::make_unique<IbTransport>(probe);
}

}  // namespace braid
