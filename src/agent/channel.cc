#include "agent/channel.h"

#include <errno.h>
#include <unistd.h>

namespace vessel::agent {

using agentproto::frameCost;

Channel::ReadResult Channel::readSome() {
  char buf[64 * 1024];
  ssize_t n = ::read(fd_, buf, sizeof buf);
  if (n > 0) {
    if (!decoder_.feed(std::string_view(buf, static_cast<size_t>(n))).ok())
      return ReadResult::kError;
    return ReadResult::kData;
  }
  if (n == 0) return ReadResult::kEof;
  if (errno == EAGAIN || errno == EINTR) return ReadResult::kNothing;
  return ReadResult::kError;
}

void Channel::addCredit(uint32_t id, uint32_t n) {
  auto it = credit_.find(id);
  if (it == credit_.end()) return;
  it->second += n;
  if (it->second > agentproto::kMaxCredit) it->second = agentproto::kMaxCredit;
}

bool Channel::canSend(uint32_t stream, size_t payload_len) const {
  if (queued() >= kMaxQueued) return false;
  auto it = credit_.find(stream);
  return it != credit_.end() && it->second >= frameCost(payload_len);
}

void Channel::send(MsgType type, uint32_t stream, std::string_view payload) {
  if (stream != 0 && agentproto::costsCredit(type)) {
    auto it = credit_.find(stream);
    if (it == credit_.end()) return;  // stream already ended: nothing to say
    uint64_t cost = frameCost(payload.size());
    it->second = it->second >= cost ? it->second - cost : 0;
  }
  if (out_pos_ > 0 && out_pos_ >= out_.size() / 2) {
    out_.erase(0, out_pos_);
    out_pos_ = 0;
  }
  std::string frame = agentproto::encodeFrame(type, stream, payload);
  frame_lens_.push_back(frame.size());
  out_ += frame;
}

void Channel::sendOk(uint32_t stream) {
  send(MsgType::kOk, stream, "");
  closeStream(stream);
}

void Channel::sendError(uint32_t stream, const Error& e) {
  sendMsg(stream, agentproto::toErrorMsg(e));
  closeStream(stream);
}

void Channel::grant(uint32_t stream, uint32_t bytes) {
  // A stream that already ended gets no credit: the host would rightly
  // treat a frame on a dead stream as a protocol violation.
  if (bytes == 0 || !hasStream(stream)) return;
  sendMsg(stream, agentproto::CreditMsg{bytes});
}

bool Channel::flush() {
  while (out_pos_ < out_.size()) {
    ssize_t n = ::write(fd_, out_.data() + out_pos_, out_.size() - out_pos_);
    if (n > 0) {
      out_pos_ += static_cast<size_t>(n);
      head_written_ += static_cast<size_t>(n);
      while (!frame_lens_.empty() && head_written_ >= frame_lens_.front()) {
        head_written_ -= frame_lens_.front();
        frame_lens_.pop_front();
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    return false;
  }
  out_.clear();
  out_pos_ = 0;
  frame_lens_.clear();
  head_written_ = 0;
  return true;
}

void Channel::resetSession() {
  // Finish the frame that is half on the wire, drop the rest: the new host
  // then sees whole frames only.
  std::string rest;
  if (head_written_ > 0 && !frame_lens_.empty())
    rest = out_.substr(out_pos_, frame_lens_.front() - head_written_);
  out_ = std::move(rest);
  out_pos_ = 0;
  frame_lens_.clear();
  if (!out_.empty()) frame_lens_.push_back(out_.size());
  head_written_ = 0;
  credit_.clear();
}

void Channel::reset() {
  decoder_ = agentproto::FrameDecoder();
  out_.clear();
  out_pos_ = 0;
  frame_lens_.clear();
  head_written_ = 0;
  credit_.clear();
}

}  // namespace vessel::agent
