#pragma once
// Relaying HTTP/1.1 responses from a server we do not trust (a sandbox's
// port, a node) to a client: every response head is parsed, bounded, and
// every body framed by what its head and its request say, so that what
// reaches the client is a sequence of well-formed responses, one per
// request, in order. Interim responses (1xx but 101) are passed on and the
// request still waits for its final one; the connection turns into opaque
// bytes only after a `101 Switching Protocols` answering a well-formed
// upgrade request, never on an `Upgrade` header alone (a 200 carrying one
// stays framed). The egress gateway was fixed for the same pattern; its
// own parser (gateway/http/response_head.h) stays its own, since the
// gateway may include only os/ and base/ and this one is Beast's.
//
// Used by the streaming forwarder (http/forward.h: classifyResponse) and by
// the sandbox ports' proxy (ingress/proxy.h: ResponseRelay over the bytes a
// guest's port sends). Sans-I/O: bytes in, bytes out; fuzzed
// (tests/fuzz/response_relay).
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "http/names.h"

namespace vessel::http {

// A request the client may switch protocols on: HTTP/1.1, an `Upgrade`
// header naming a protocol, and `upgrade` among the `Connection` options
// (RFC 9110 7.8); a method other than CONNECT.
bool wellFormedUpgrade(const request_header<>& h);

enum class ResponseKind {
  kInterim,    // 1xx but 101: pass it on, the final response is still to come
  kFinal,      // the request's answer
  kSwitch,     // 101 to a well-formed upgrade request: opaque bytes from here
  kBadSwitch,  // 101 to a request that asked for no upgrade: the server is broken
};
ResponseKind classifyResponse(unsigned status, bool upgrade_asked);

// What a request said that its response's framing depends on.
struct Asked {
  bool head = false;     // HEAD: no body, whatever the head says
  bool upgrade = false;  // wellFormedUpgrade()
};

class ResponseRelay {
 public:
  explicit ResponseRelay(uint32_t max_head_bytes = 64 * 1024) : max_head_(max_head_bytes) {}

  // A request went to the server; its response comes after the earlier ones'.
  void expect(Asked asked) { asked_.push_back(asked); }

  enum class State {
    kFramed,  // `out` holds whole or partial well-formed responses; more may come
    kOpaque,  // switched: `out` ends with the first bytes of the new protocol,
              // everything after is relayed as it is (feed() passes it through)
  };
  // Takes the server's next bytes and appends to `out` what may go to the
  // client now. kProtocol when the server sends what is no response, a
  // response nobody asked for, a 101 nobody asked for, or a head over the
  // limit: the caller cuts both connections (what `out` holds may still go).
  Result<State> feed(std::string_view in, std::string& out);
  // The server closed its side: ok when that ended a response (one whose
  // body only the close delimits) or came between responses; kProtocol
  // when it cut one short.
  Status end();

  // Requests sent whose final response has not ended.
  size_t waiting() const { return asked_.size(); }
  // Final responses that have ended (interim ones are not counted).
  uint64_t answered() const { return answered_; }
  bool opaque() const { return opaque_; }

 private:
  Status step(std::string& out, bool& progressed);

  uint32_t max_head_;
  std::deque<Asked> asked_;
  std::optional<response_parser<buffer_body>> parser_;
  std::string pending_;  // bytes read and not yet parsed
  uint64_t answered_ = 0;
  bool interim_ = false;  // the waiting request has had a 1xx, not yet its answer
  bool opaque_ = false;
};

}  // namespace vessel::http
