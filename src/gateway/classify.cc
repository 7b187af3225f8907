#include "gateway/classify.h"

#include <cstdint>

namespace vessel::gateway {

namespace {

bool looksLikeHttp(char c) { return c >= 'A' && c <= 'Z'; }

}  // namespace

std::string_view kindName(Classified::Kind k) {
  switch (k) {
    case Classified::Kind::kUnknown: return "unknown";
    case Classified::Kind::kTls: return "tls";
    case Classified::Kind::kHttp: return "http";
    case Classified::Kind::kOpaque: return "opaque";
  }
  return "?";
}

bool FirstBytes::feed(std::string_view chunk) {
  if (done_) return true;
  c_.bytes.append(chunk);
  if (c_.bytes.empty()) return false;
  using Kind = Classified::Kind;
  if (c_.kind == Kind::kUnknown) {
    char first = c_.bytes[0];
    c_.kind = tls::ClientHelloParser::looksLikeTls(static_cast<uint8_t>(first)) ? Kind::kTls
              : looksLikeHttp(first)                                            ? Kind::kHttp
                                                                                : Kind::kOpaque;
  }
  if (c_.kind == Kind::kTls) {
    // The parser keeps its own bounded copy of the records it still needs.
    tls::ClientHelloParser::State s = hello_.feed(chunk);
    if (s != tls::ClientHelloParser::State::kNeedMore) {
      c_.complete = s == tls::ClientHelloParser::State::kDone;
      if (c_.complete) c_.hello = hello_.hello();
      done_ = true;
    }
  } else if (c_.kind == Kind::kHttp) {
    // Parsed again from the start on each chunk: a head is at most
    // http::kMaxHeadBytes, past which the parser refuses it.
    http::ParseResult r = http::parseRequestHead(c_.bytes);
    if (r.state != http::ParseResult::State::kNeedMore) {
      c_.complete = r.state == http::ParseResult::State::kDone;
      if (c_.complete) c_.head = std::move(r.head);
      done_ = true;
    }
  } else {
    done_ = true;  // nothing to wait for: the decision is made on the first byte
  }
  if (c_.bytes.size() > kClassifyCap) done_ = true;
  return done_;
}

}  // namespace vessel::gateway
