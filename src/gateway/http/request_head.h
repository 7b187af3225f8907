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

// kUntilClose: a response framed by the connection's end.
enum class BodyKind { kNone, kLength, kChunked, kUntilClose };

struct RequestHead {
  std::string method;
  std::string target;
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  Authority authority;  // from Host; equal to the absolute-form one if present
  std::vector<Header> headers;
  BodyKind body = BodyKind::kNone;
  uint64_t content_length = 0;
  bool websocket_upgrade = false;   // "Upgrade: websocket"
  bool connection_upgrade = false;  // "Connection" lists "upgrade"
  bool expect_continue = false;     // "Expect: 100-continue"
  size_t head_bytes = 0;            // length of the head including the final CRLF CRLF

  // An upgrade the gateway may switch to opaque bytes for, once the upstream
  // answers 101: both the Upgrade and the Connection token are present.
  bool upgradeWellFormed() const { return websocket_upgrade && connection_upgrade; }
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

// Follows a body so the gateway knows where the next head starts:
// Content-Length bytes, a chunked body up to its last-chunk and trailers, or
// (responses only) everything until the connection closes. Chunk lines and
// trailers are checked as strictly as heads: CRLF only, no bare CR, no
// control bytes in extensions, trailers are `token: value` and never carry
// framing or routing fields.
class BodyTracker {
 public:
  explicit BodyTracker(const RequestHead& head);
  BodyTracker(BodyKind kind, uint64_t length);
  // Consumes as much of `data` as belongs to this body; returns that count.
  // Sets done() at the end of the body and failed() on malformed chunking.
  // The payload bytes (chunk framing removed) are appended to `payload`
  // when given.
  size_t consume(std::string_view data, std::string* payload = nullptr);
  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kError; }
  // The trailer section as received (empty lines excluded), once done().
  const std::string& trailers() const { return trailers_; }
  const std::string& error() const { return error_; }

 private:
  enum class State { kLength, kChunkSize, kChunkData, kChunkDataCrlf, kTrailer, kDone, kError };
  void fail(std::string why);
  void endLine();
  State state_;
  uint64_t remaining_ = 0;
  std::string line_;  // current chunk-size or trailer line
  std::string trailers_;
  std::string error_;
};

// Parses a header line "name: value" (no CRLF) the way heads and trailers
// are checked; false on anything ambiguous.
bool parseHeaderLine(std::string_view line, Header* out, std::string* why);

}  // namespace vessel::gateway::http
