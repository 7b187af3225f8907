#pragma once
// Classify: what the first bytes of a guest TCP connection are. The proxy
// feeds every chunk it reads here until the TLS ClientHello or the HTTP/1
// request head is whole (or refused), so the decision (decide.h) is made on
// a parsed hello or head, never on a guess from a partial read. Pure and
// bounded: at most kClassifyCap bytes are kept, whatever the guest sends.
#include <cstddef>
#include <string>
#include <string_view>

#include "gateway/http/request_head.h"
#include "gateway/tls/client_hello.h"

namespace vessel::gateway {

// A whole ClientHello across its records, with room for the record
// headers and a few stray bytes after it.
inline constexpr size_t kClassifyCap = tls::kMaxHelloBytes + 16 * 1024 + 64;

struct Classified {
  // Chosen on the first byte: a TLS handshake record, an upper-case letter
  // (an HTTP method), anything else. kUnknown: nothing arrived.
  enum class Kind { kUnknown, kTls, kHttp, kOpaque };
  Kind kind = Kind::kUnknown;
  // The hello (kTls) or head (kHttp) arrived whole and parsed cleanly.
  bool complete = false;
  // The deadline passed before the bytes were enough.
  bool timed_out = false;
  tls::ClientHello hello;  // kTls && complete
  http::RequestHead head;  // kHttp && complete
  // Every byte read: forwarded upstream before anything else.
  std::string bytes;
};

std::string_view kindName(Classified::Kind k);

class FirstBytes {
 public:
  // Appends a chunk as the guest sent it. True once no more bytes are
  // needed: the hello or head is whole or refused, the first byte said
  // "opaque", or kClassifyCap was passed. Later calls change nothing.
  bool feed(std::string_view chunk);
  // The deadline passed before feed() returned true.
  void timeOut() { c_.timed_out = true; }
  const Classified& result() const { return c_; }
  Classified take() && { return std::move(c_); }

 private:
  Classified c_;
  tls::ClientHelloParser hello_;
  bool done_ = false;
};

}  // namespace vessel::gateway
