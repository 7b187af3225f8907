#pragma once
// The agent's end of the channel: a non-blocking fd, the frame decoder, the
// outbound byte queue and the per-stream send credit (docs/agent-protocol.md
// §4). Everything the agent sends goes through send(), which charges credit,
// so the agent can never put more on the wire for a stream than the host
// granted.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "agentproto/frame.h"
#include "agentproto/messages.h"

namespace vessel::agent {

using agentproto::MsgType;

class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}
  int fd() const { return fd_; }

  enum class ReadResult { kData, kNothing, kEof, kError };
  // Reads what is available into the decoder.
  ReadResult readSome();
  // The next complete frame, nullopt when none, or an Error (decoder failed).
  Result<std::optional<agentproto::Frame>> nextFrame() { return decoder_.next(); }

  // Stream bookkeeping: a stream has send credit from the moment it exists.
  void openStream(uint32_t id) { credit_[id] = agentproto::kInitialWindow; }
  void closeStream(uint32_t id) { credit_.erase(id); }
  bool hasStream(uint32_t id) const { return credit_.count(id) != 0; }
  void addCredit(uint32_t id, uint32_t n);

  // True if a frame with this payload size may be sent now: the stream has
  // the credit and the outbound queue has room (bounded memory and fairness).
  bool canSend(uint32_t stream, size_t payload_len) const;
  // Queues a frame, charging credit. Callers check canSend() first for data;
  // small replies on fresh streams always fit in the initial window.
  void send(MsgType type, uint32_t stream, std::string_view payload);
  template <typename M>
  void sendMsg(uint32_t stream, const M& m) {
    auto p = agentproto::encodeMsg(m);
    if (p.ok()) send(M::kType, stream, *p);
  }
  // Terminal frames end the stream (§3).
  void sendOk(uint32_t stream);
  void sendError(uint32_t stream, const Error& e);
  // Grants the host credit for bytes the agent consumed on a stream.
  void grant(uint32_t stream, uint32_t bytes);

  bool wantWrite() const { return out_pos_ < out_.size(); }
  size_t queued() const { return out_.size() - out_pos_; }
  // Writes what the fd accepts; false on a hard error.
  bool flush();
  // After the host went away: forget everything in flight.
  void reset();
  // A new host session on a decoder that is still in step: drop stream
  // state and unsent output, keep the decoder.
  void resetSession();

 private:
  int fd_;
  agentproto::FrameDecoder decoder_;
  std::string out_;
  size_t out_pos_ = 0;
  // Sizes of the queued frames, oldest first, and how much of the oldest is
  // already written: a new session must not start in the middle of a frame.
  std::deque<size_t> frame_lens_;
  size_t head_written_ = 0;
  std::unordered_map<uint32_t, uint64_t> credit_;
};

// How much may wait in the outbound queue before data producers pause.
constexpr size_t kMaxQueued = 512 * 1024;

}  // namespace vessel::agent
