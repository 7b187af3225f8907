#include "e2b/envd/connect.h"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

namespace vessel::e2b::envd {

namespace json = boost::json;

std::string encodeEnvelope(uint8_t flags, std::string_view data) {
  std::string out;
  out.reserve(5 + data.size());
  out.push_back(static_cast<char>(flags));
  uint32_t n = static_cast<uint32_t>(data.size());
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((n >> shift) & 0xff));
  out.append(data);
  return out;
}

std::string_view connectCode(Code c) {
  // Connect's names are ours (codeName) except that it has no "protocol":
  // bytes we could not accept from a peer are an internal error to a client.
  return c == Code::kProtocol ? std::string_view("internal") : codeName(c);
}

int connectHttpStatus(Code c) {
  switch (c) {
    case Code::kInvalidArgument: return 400;
    case Code::kNotFound: return 404;
    case Code::kAlreadyExists: return 409;
    case Code::kFailedPrecondition: return 400;
    case Code::kResourceExhausted: return 429;
    case Code::kDeadlineExceeded: return 504;
    case Code::kUnavailable: return 503;
    case Code::kPermissionDenied: return 403;
    case Code::kUnauthenticated: return 401;
    case Code::kProtocol:
    case Code::kInternal: return 500;
  }
  return 500;
}

std::string errorJson(const Error& e) {
  json::object o{{"code", connectCode(e.code())}, {"message", e.message()}};
  return json::serialize(o);
}

std::string endStreamEnvelope(const Error* error) {
  if (!error) return encodeEnvelope(kFlagEndStream, "{}");
  json::object err{{"code", connectCode(error->code())}, {"message", error->message()}};
  return encodeEnvelope(kFlagEndStream, json::serialize(json::object{{"error", std::move(err)}}));
}

Status EnvelopeDecoder::feed(std::string_view bytes) {
  // Compact once the consumed prefix dominates, so the buffer stays bounded
  // by one envelope plus one read.
  if (pos_ > 0 && pos_ * 2 >= buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  // next() caps each envelope; this bounds what may pile up unread.
  if (buffered() + bytes.size() > max_ + 5 + (1 << 16))
    return Error(Code::kResourceExhausted, "connect stream: too many unread bytes");
  buf_.append(bytes);
  return okStatus();
}

Result<std::optional<Envelope>> EnvelopeDecoder::next() {
  std::string_view b(buf_);
  b.remove_prefix(pos_);
  if (b.size() < 5) return std::optional<Envelope>();
  uint8_t flags = static_cast<uint8_t>(b[0]);
  uint32_t n = 0;
  for (int i = 1; i <= 4; ++i) n = (n << 8) | static_cast<uint8_t>(b[i]);
  if (flags & ~(kFlagCompressed | kFlagEndStream))
    return Error(Code::kInvalidArgument,
                 "connect envelope: unknown flags " + std::to_string(flags));
  if (flags & kFlagCompressed)
    return Error(Code::kInvalidArgument, "connect envelope: compressed, no encoding was agreed");
  if (n > max_)
    return Error(Code::kResourceExhausted, "connect envelope: " + std::to_string(n) +
                                               " bytes, more than " + std::to_string(max_));
  if (b.size() - 5 < n) return std::optional<Envelope>();
  Envelope e;
  e.flags = flags;
  e.data.assign(b.substr(5, n));
  pos_ += 5 + n;
  return std::optional<Envelope>(std::move(e));
}

Result<std::string> singleRequestMessage(std::string_view body) {
  EnvelopeDecoder d;
  VESSEL_TRY(d.feed(body));
  VESSEL_ASSIGN_OR_RETURN(std::optional<Envelope> e, d.next());
  if (!e) return Error(Code::kInvalidArgument, "connect stream: truncated request envelope");
  if (e->flags & kFlagEndStream)
    return Error(Code::kInvalidArgument, "connect stream: end-of-stream instead of a request");
  if (d.buffered() != 0)
    return Error(Code::kInvalidArgument,
                 "connect stream: a server-streaming call takes exactly one request message");
  return std::move(e->data);
}

}  // namespace vessel::e2b::envd
