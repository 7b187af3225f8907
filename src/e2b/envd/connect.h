#pragma once
// The Connect protocol's wire pieces (connectrpc.com/docs/protocol) as envd
// speaks them on HTTP/1.1 with the JSON codec: a stream's body is a series
// of envelopes, each a flags byte, a big-endian u32 length and that many
// bytes of JSON; the last one the server sends has the end-of-stream flag
// and carries the error, if any. Unary calls are plain JSON bodies whose
// errors are `{"code": <name>, "message": ...}` with a matching HTTP status.
//
// Client bytes are parsed here, once, by a bounded decoder (fuzzed in
// tests/fuzz/connect_envelope).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::e2b::envd {

inline constexpr uint8_t kFlagCompressed = 0x01;
inline constexpr uint8_t kFlagEndStream = 0x02;
// A request message larger than this is refused (envd's requests are small;
// file content goes over /files, not Connect).
inline constexpr size_t kMaxEnvelope = 4 << 20;

struct Envelope {
  uint8_t flags = 0;
  std::string data;
};

std::string encodeEnvelope(uint8_t flags, std::string_view data);
// The end-of-stream envelope: `{}` on success, else the error in Connect's
// form (code name and message).
std::string endStreamEnvelope(const Error* error);

// Splits a byte stream into envelopes. Compressed envelopes are refused
// (we never advertise an encoding), as is anything over max_size.
class EnvelopeDecoder {
 public:
  explicit EnvelopeDecoder(size_t max_size = kMaxEnvelope) : max_(max_size) {}
  // Appends bytes; an error once the buffered bytes can no longer frame a
  // legal envelope.
  Status feed(std::string_view bytes);
  // The next whole envelope, nullopt if more bytes are needed.
  Result<std::optional<Envelope>> next();
  // Bytes not yet part of a returned envelope.
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  size_t max_;
  std::string buf_;
  size_t pos_ = 0;
};

// The single request message of a server-streaming call's body: exactly one
// envelope, not compressed, not end-of-stream.
Result<std::string> singleRequestMessage(std::string_view body);

// Connect's code name for an error ("not_found", "deadline_exceeded", ...).
std::string_view connectCode(Code c);
// The HTTP status a unary error is sent with (Connect's mapping).
int connectHttpStatus(Code c);
// `{"code": ..., "message": ...}`.
std::string errorJson(const Error& e);

}  // namespace vessel::e2b::envd
