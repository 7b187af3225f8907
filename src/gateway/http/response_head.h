#pragma once
// HTTP/1.1 response-head parser for the relays. The gateway reads every
// response on a connection it relays so that it knows which request each one
// answers: only a 101 to a well-formed upgrade turns the connection into
// opaque bytes, a final response that arrives while its request body is
// still being sent ends the connection, and on credentialed connections the
// body is de-chunked before it is scrubbed. Framing follows RFC 9112 6.3.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/http/request_head.h"

namespace vessel::gateway::http {

inline constexpr size_t kMaxResponseHeadBytes = 64 * 1024;

struct ResponseHead {
  int status = 0;
  std::vector<Header> headers;  // names lowercase
  BodyKind body = BodyKind::kNone;
  uint64_t content_length = 0;
  bool upgrade_websocket = false;   // "Upgrade: websocket"
  bool connection_upgrade = false;  // "Connection" lists "upgrade"
  std::string content_encoding;     // lowercase, empty for none/identity
  size_t head_bytes = 0;

  bool interim() const { return status >= 100 && status < 200; }
};

struct ResponseParse {
  enum class State { kNeedMore, kDone, kError } state = State::kNeedMore;
  ResponseHead head;
  std::string error;
};

// Parses the response head at the start of `buf`, answering a request made
// with `request_method` (a HEAD response has no body).
ResponseParse parseResponseHead(std::string_view buf, std::string_view request_method);

}  // namespace vessel::gateway::http
