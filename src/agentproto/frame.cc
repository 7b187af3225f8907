#include "agentproto/frame.h"

#include "base/byte_reader.h"

namespace vessel::agentproto {

std::string encodeFrame(MsgType type, uint32_t stream, std::string_view payload) {
  VESSEL_CHECK(payload.size() <= kMaxPayload);
  ByteWriter w;
  w.u32le(static_cast<uint32_t>(payload.size()));
  w.u16le(static_cast<uint16_t>(type));
  w.u16le(0);
  w.u32le(stream);
  w.bytes(payload);
  return w.take();
}

Status FrameDecoder::feed(std::string_view bytes) {
  if (failed_) return *failed_;
  // Compact before growing so a long-lived channel does not accumulate
  // consumed bytes.
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
  return okStatus();
}

Result<std::optional<Frame>> FrameDecoder::next() {
  if (failed_) return *failed_;
  std::string_view avail(buf_.data() + pos_, buf_.size() - pos_);
  ByteReader r(avail);
  uint32_t len;
  uint16_t type, flags;
  uint32_t stream;
  if (!r.readU32le(&len) || !r.readU16le(&type) || !r.readU16le(&flags) || !r.readU32le(&stream))
    return std::optional<Frame>();
  if (len > kMaxPayload) {
    failed_ =
        Error(Code::kProtocol, "agent frame of " + std::to_string(len) +
                                   " bytes exceeds the maximum of " + std::to_string(kMaxPayload));
    return *failed_;
  }
  if (flags != 0) {
    failed_ = Error(Code::kProtocol, "agent frame with unknown flags " + std::to_string(flags));
    return *failed_;
  }
  std::string_view payload;
  if (!r.readBytes(len, &payload)) return std::optional<Frame>();
  Frame f{static_cast<MsgType>(type), flags, stream, std::string(payload)};
  pos_ += kHeaderSize + len;
  return std::optional<Frame>(std::move(f));
}

std::string FrameDecoder::takeBuffered() {
  std::string rest = buf_.substr(pos_);
  buf_.clear();
  pos_ = 0;
  return rest;
}

std::string encodeHello(const Hello& h) {
  ByteWriter w;
  w.u32le(kHelloMagic);
  w.u16le(h.min_version);
  w.u16le(h.max_version);
  w.lenPrefixed32(h.agent_version.substr(0, 64));
  return w.take();
}

Result<Hello> decodeHello(std::string_view payload) {
  ByteReader r(payload);
  uint32_t magic;
  Hello h;
  std::string_view ver;
  if (!r.readU32le(&magic) || magic != kHelloMagic)
    return Error(Code::kProtocol, "agent hello: bad magic");
  if (!r.readU16le(&h.min_version) || !r.readU16le(&h.max_version) ||
      !r.readLenPrefixed32(64, &ver) || !r.empty())
    return Error(Code::kProtocol, "agent hello: malformed");
  if (h.min_version > h.max_version)
    return Error(Code::kProtocol, "agent hello: min version above max version");
  h.agent_version = std::string(ver);
  return h;
}

std::string encodeHelloAck(const HelloAck& a) {
  ByteWriter w;
  w.u16le(a.version);
  return w.take();
}

Result<HelloAck> decodeHelloAck(std::string_view payload) {
  ByteReader r(payload);
  HelloAck a;
  if (!r.readU16le(&a.version) || !r.empty())
    return Error(Code::kProtocol, "agent hello ack: malformed");
  return a;
}

}  // namespace vessel::agentproto
