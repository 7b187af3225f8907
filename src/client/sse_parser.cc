#include "client/sse_parser.h"

namespace vessel::client {

Status SseParser::feed(std::string_view bytes) {
  if (failed_) return Error(Code::kProtocol, "event stream: parser failed earlier");
  for (char c : bytes) {
    if (skip_lf_) {
      skip_lf_ = false;
      if (c == '\n') continue;
    }
    if (c == '\r' || c == '\n') {
      skip_lf_ = c == '\r';
      Status s = line(partial_);
      partial_.clear();
      if (!s.ok()) {
        failed_ = true;
        return s;
      }
      continue;
    }
    if (partial_.size() + data_.size() >= max_event_bytes_) {
      failed_ = true;
      return Error(Code::kProtocol, "event stream: event larger than " +
                                        std::to_string(max_event_bytes_) + " bytes");
    }
    partial_.push_back(c);
  }
  return okStatus();
}

std::optional<SseEvent> SseParser::next() {
  if (ready_.empty()) return std::nullopt;
  SseEvent e = std::move(ready_.front());
  ready_.pop_front();
  return e;
}

Status SseParser::line(std::string_view l) {
  if (l.empty()) {
    dispatch();
    return okStatus();
  }
  if (l.front() == ':') return okStatus();  // a comment, e.g. a keepalive
  std::string_view field = l, value;
  if (auto colon = l.find(':'); colon != std::string_view::npos) {
    field = l.substr(0, colon);
    value = l.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) data_.push_back('\n');
    data_.append(value);
    has_data_ = true;
    if (data_.size() > max_event_bytes_)
      return Error(Code::kProtocol, "event stream: event larger than " +
                                        std::to_string(max_event_bytes_) + " bytes");
  } else if (field == "event") {
    type_ = std::string(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) last_id_ = std::string(value);
  }
  // `retry:` and unknown fields are ignored, as the format asks.
  return okStatus();
}

void SseParser::dispatch() {
  // A block without data is not an event (but its id still counts).
  if (!has_data_) {
    type_.clear();
    return;
  }
  SseEvent e;
  e.id = last_id_;
  if (!type_.empty()) e.type = std::move(type_);
  e.data = std::move(data_);
  ready_.push_back(std::move(e));
  type_.clear();
  data_.clear();
  has_data_ = false;
}

}  // namespace vessel::client
