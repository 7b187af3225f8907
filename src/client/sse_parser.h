#pragma once
// An incremental parser for the text/event-stream format (the WHATWG
// "server-sent events" rules): bytes in, whole events out. It knows nothing
// about sockets, so the control-plane event streams and the data plane's
// exec streams share it, and it is tested and fuzzed on its own. Lines end
// with LF, CRLF or CR; `:` lines are comments (keepalives); `data:` lines
// join with LF; a blank line ends an event. Every line and event is capped,
// since the bytes come from the network.
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::client {

struct SseEvent {
  std::string id;                // the last `id:` seen (it carries over, as the spec says)
  std::string type = "message";  // `event:`, "message" when absent
  std::string data;              // `data:` lines joined with "\n"
};

class SseParser {
 public:
  explicit SseParser(size_t max_event_bytes = 8 << 20) : max_event_bytes_(max_event_bytes) {}
  // Consumes bytes; complete events queue up for next(). An event or line
  // over the cap is an error and the parser stays failed.
  Status feed(std::string_view bytes);
  std::optional<SseEvent> next();
  // The id of the last dispatched event: what a reconnect sends as Last-Event-ID.
  const std::string& lastEventId() const { return last_id_; }

 private:
  Status line(std::string_view l);
  void dispatch();

  size_t max_event_bytes_;
  std::string partial_;   // an unfinished line
  bool skip_lf_ = false;  // the last byte was CR: a following LF is part of that line end
  bool failed_ = false;
  std::string last_id_;
  std::string type_, data_;
  bool has_data_ = false;
  std::deque<SseEvent> ready_;
};

}  // namespace vessel::client
