#pragma once
// The agent channel's framing, shared by the host (untrusted input: the guest
// may send anything) and the guest agent. See docs/agent-protocol.md.
//
// Wire format, little-endian, one byte stream carrying every logical stream:
//   u32 payload_length   (<= kMaxPayload, checked before anything is buffered)
//   u16 type             (MsgType)
//   u16 flags            (must be 0 in version 1)
//   u32 stream_id        (0 = the control stream)
//   payload_length bytes
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::agentproto {

constexpr size_t kHeaderSize = 12;
// Large enough for efficient 64 KiB data chunks plus metadata; small enough
// that a hostile guest cannot make the host buffer much per channel.
constexpr size_t kMaxPayload = 256 * 1024;
constexpr uint32_t kHelloMagic = 0x4c535356;  // "VSSL" little-endian
constexpr uint16_t kProtocolVersion = 1;

enum class MsgType : uint16_t {
  // Handshake: the guest sends kHello as soon as its channel is open; this
  // is the "ready" signal the host's boot waits for. The host answers
  // kHelloAck with the version it chose.
  kHello = 1,
  kHelloAck = 2,
  kPing = 3,
  kPong = 4,
  kError = 5,
  // Types 16 and up belong to processes, files and identity (agent issue).
};

struct Frame {
  MsgType type;
  uint16_t flags = 0;
  uint32_t stream = 0;
  std::string payload;
};

std::string encodeFrame(MsgType type, uint32_t stream, std::string_view payload);

// Incremental decoder: feed() whatever bytes arrived, then call next() until
// it yields nothing. A frame whose header announces more than kMaxPayload or
// non-zero flags is an Error, and the decoder stays failed: the channel is
// not trusted after that.
class FrameDecoder {
 public:
  Status feed(std::string_view bytes);
  Result<std::optional<Frame>> next();
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  size_t pos_ = 0;
  std::optional<Error> failed_;
};

struct Hello {
  uint16_t min_version = kProtocolVersion;
  uint16_t max_version = kProtocolVersion;
  std::string agent_version;  // free text, at most 64 bytes
};
std::string encodeHello(const Hello& h);
Result<Hello> decodeHello(std::string_view payload);

struct HelloAck {
  uint16_t version = kProtocolVersion;
};
std::string encodeHelloAck(const HelloAck& a);
Result<HelloAck> decodeHelloAck(std::string_view payload);

}  // namespace vessel::agentproto
