#pragma once
// Strict HTTP/1.1 request-head parser and body-framing tracker. The gateway
// reads every request on a plaintext or terminated connection through this:
// one Host, no obs-fold, CRLF only, absolute-form authority must equal Host,
// unambiguous body framing (no Content-Length together with
// Transfer-Encoding, no duplicates), so request smuggling and Host confusion
// are refused at the edge rather than interpreted differently upstream.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/name.h"

namespace vessel::gateway::http {

inline constexpr size_t kMaxHeadBytes = 32 * 1024;
inline constexpr size_t kMaxHeaders = 100;

struct Header {
  std::string name;  // lowercase
  std::string value;
};

enum class BodyKind { kNone, kLength, kChunked };

struct RequestHead {
  std::string method;
  std::string target;
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  Authority authority;  // from Host; equal to the absolute-form one if present
  std::vector<Header> headers;
  BodyKind body = BodyKind::kNone;
  uint64_t content_length = 0;
  bool websocket_upgrade = false;
  size_t head_bytes = 0;  // length of the head including the final CRLF CRLF

  // Removes every header named `name` (lowercase).
  void removeHeader(std::string_view name);
  // The head serialized again, as forwarded upstream.
  std::string serialize() const;
};

struct ParseResult {
  enum class State { kNeedMore, kDone, kError } state = State::kNeedMore;
  RequestHead head;
  std::string error;
};

// Parses the head at the start of `buf`. kNeedMore until CRLFCRLF arrives
// (and kError past kMaxHeadBytes).
ParseResult parseRequestHead(std::string_view buf);

// Follows a request body so the gateway knows where the next request head
// starts: Content-Length bytes or a chunked body up to its last-chunk and
// trailers.
class BodyTracker {
 public:
  explicit BodyTracker(const RequestHead& head);
  // Consumes as much of `data` as belongs to this body; returns that count.
  // Sets done() at the end of the body and error() on malformed chunking.
  size_t consume(std::string_view data);
  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kError; }

 private:
  enum class State { kLength, kChunkSize, kChunkData, kChunkDataCrlf, kTrailer, kDone, kError };
  State state_;
  uint64_t remaining_ = 0;
  std::string line_;  // current chunk-size or trailer line
};

}  // namespace vessel::gateway::http
