// The data path of a TCP connection. Each side keeps its own slot ring; the
// sender's progress() writes posted slots to the socket, the receiver's
// progress() reads them into free slots. On the wire every slot is a frame:
// a FrameHeader followed by `bytes` bytes of payload.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/common/aligned_buffer.h"
#include "transports/common/unique_fd.h"
#include "transports/tcp/tcp_wire.h"
#include "transports/transport.h"

namespace braid {

using tcp::FrameHeader;

// Geometry shared by both sides' local slot rings.
struct SlotRing {
  SlotRing(size_t slotBytes, int nslots);
  uint8_t* slot(uint64_t seq) const { return memory.data() + (seq % nslots) * stride; }
  bool allocated() const { return memory.data() != nullptr; }

  size_t slotBytes;
  size_t stride;
  uint32_t nslots;
  AlignedBuffer memory;
};

class TcpSend final : public SendConnection {
 public:
  TcpSend(UniqueFd fd, size_t slotBytes, int nslots, std::string peer);
  void* acquire() override;
  void post(size_t bytes) override;
  Result progress() override;
  bool flushed() const override { return sent_ == posted_; }
  bool allocated() const { return ring_.allocated(); }

 private:
  Result writeSome(bool* drained);

  UniqueFd fd_;
  SlotRing ring_;
  std::vector<FrameHeader> headers_;
  uint64_t posted_ = 0;     // slots handed to post()
  uint64_t sent_ = 0;       // slots entirely written to the socket
  size_t frameOffset_ = 0;  // bytes of frame `sent_` already written
  std::string peer_;
  Result error_;            // sticky: a broken stream stays broken
};

class TcpRecv final : public RecvConnection {
 public:
  TcpRecv(UniqueFd fd, size_t slotBytes, int nslots, std::string peer);
  const void* peek(size_t* bytes) override;
  void release() override;
  Result progress() override;
  bool allocated() const { return ring_.allocated(); }

 private:
  Result readSome(bool* drained);
  Result headerComplete();

  UniqueFd fd_;
  SlotRing ring_;
  std::vector<uint64_t> sizes_;
  uint64_t received_ = 0;    // complete slots
  uint64_t released_ = 0;
  FrameHeader header_{};     // header of frame `received_` while it arrives
  size_t headerGot_ = 0;     // bytes of header_ read so far
  size_t payloadGot_ = 0;    // bytes of payload of frame `received_` read so far
  bool inPayload_ = false;   // header_ complete, payload still arriving
  bool peerClosed_ = false;  // end of stream seen at a frame boundary
  std::string peer_;
  Result error_;
};

}  // namespace braid
