// The data path of a TCP connection. Each side keeps its own slot ring; the
// sender's progress() writes posted slots to the sockets, the receiver's
// progress() reads them into free slots. On the wire every slot is a frame:
// a FrameHeader followed by `bytes` bytes of payload. A connection may have
// several sockets: a slot large enough is then cut into stripes
// (tcp::stripeOf), stripe i going to socket i as a header plus that stripe;
// socket 0 carries every slot, so the slot's size is known from it.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/unique_fd.h"
#include "transports/tcp/tcp_wire.h"
#include "transports/transport.h"

namespace braid::tcp {

using tcp::FrameHeader;

// Geometry shared by both sides' local slot rings: memory of their own, or
// the engine's FIFO slots they adopted (useSlots).
struct SlotRing {
  SlotRing(size_t slotBytes, int nslots);
  uint8_t* slot(uint64_t seq) const { return base + ((seq + first) % nslots) * stride; }
  bool allocated() const { return base != nullptr; }
  bool adopt(const transports::SlotMemory& slots);

  size_t slotBytes;
  size_t stride;
  uint32_t nslots;
  uint32_t first = 0;
  AlignedBuffer memory;
  uint8_t* base;
};

class TcpSend final : public transports::SendConnection {
 public:
  // `fds` are the connection's sockets in stripe order (1..tcp::kMaxSockets).
  TcpSend(std::vector<UniqueFd> fds, size_t slotBytes, int nslots, std::string peer);
  void* acquire() override;
  void post(size_t bytes, uint32_t mark = 0, const void* from = nullptr) override;
  Result progress() override;
  bool flushed() const override { return sent_ == posted_; }
  bool useSlots(const transports::SlotMemory& slots) override { return posted_ == 0 && ring_.adopt(slots); }
  uint64_t sentSlots() const override { return sent_; }
  void detach(uint64_t k) override;
  bool allocated() const { return ring_.allocated(); }

 private:
  struct Stream {
    UniqueFd fd;
    uint64_t done = 0;        // slots this socket has finished with (written or none of its)
    size_t frameOffset = 0;   // bytes of its frame of slot `done` already written
  };
  bool carries(int index, uint64_t seq) const;
  size_t frameBytes(int index, uint64_t seq) const;
  void advance(int index, size_t written);
  Result writeSome(int index, bool* socketFull);

  std::vector<Stream> streams_;
  SlotRing ring_;
  std::vector<FrameHeader> headers_;
  std::vector<const uint8_t*> sources_;  // by slot: where its bytes are (its slot, or post's `from`)
  uint64_t posted_ = 0;     // slots handed to post()
  uint64_t sent_ = 0;       // slots entirely written to every socket
  std::string peer_;
  Result error_;            // sticky: a broken stream stays broken
};

class TcpRecv final : public transports::RecvConnection {
 public:
  TcpRecv(std::vector<UniqueFd> fds, size_t slotBytes, int nslots, std::string peer);
  const void* peek(size_t* bytes, uint32_t* mark = nullptr) override;
  void release() override;
  Result progress() override;
  bool useSlots(const transports::SlotMemory& slots) override {
    return received_ == 0 && !sized_ && ring_.adopt(slots);
  }
  const void* arrived(uint64_t k, size_t* bytes, uint32_t* mark = nullptr) override;
  bool receiveInto(uint64_t k, void* dst, size_t bytes) override;
  void forgetDestinations() override { destinations_.clear(); }
  bool allocated() const { return ring_.allocated(); }

 private:
  struct Stream {
    UniqueFd fd;
    FrameHeader header{};   // socket 0: of slot `received_` (or the next) while it arrives
    size_t headerGot = 0;   // bytes of header read so far
    size_t payloadGot = 0;  // bytes of this socket's stripe of slot `received_` read so far
  };
  struct Destination {
    uint64_t slot;
    uint8_t* at;
    size_t bytes;
  };
  Result step(uint64_t* drained, bool* moved);
  Result startSlot();
  void finishSlot();
  bool partDone(int index) const;
  Result readStream(int index, uint64_t* drained, bool* moved);
  Result takeBytes(int index, size_t got);

  std::vector<Stream> streams_;
  SlotRing ring_;
  std::vector<FrameHeader> arrived_;  // by slot: its size and mark
  std::vector<uint8_t*> payloads_;    // by slot: where its bytes went (its slot, or a destination)
  std::deque<Destination> destinations_;  // receiveInto's, by increasing slot
  uint64_t received_ = 0;    // complete slots
  uint64_t released_ = 0;
  bool sized_ = false;       // socket 0's header of slot `received_` is in and checked
  uint64_t slotSize_ = 0;    // its size, once sized_
  uint32_t slotMark_ = 0;    // and its mark
  int stripes_ = 1;          // sockets that carry a part of it
  bool peerClosed_ = false;  // end of stream on socket 0 seen at a frame boundary
  std::string peer_;
  Result error_;
};

}  // namespace braid::tcp
