#include "gateway/http/request_head.h"

#include <algorithm>

namespace vessel::gateway::http {

namespace {

using State = ParseResult::State;

ParseResult failWith(std::string why) {
  ParseResult r;
  r.state = State::kError;
  r.error = "http request: " + std::move(why);
  return r;
}

bool isTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool isToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), isTokenChar);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool iequals(std::string_view a, std::string_view b) { return lower(a) == lower(b); }

std::string_view trimOws(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

bool parseDecimal(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 15) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// Comma-separated list membership, case-insensitive ("keep-alive, Upgrade").
bool listHas(std::string_view list, std::string_view want) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = trimOws(list.substr(0, comma));
    if (iequals(item, want)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

bool parseHeaderLine(std::string_view line, Header* out, std::string* why) {
  if (line.empty()) return *why = "empty header line", false;
  if (line.front() == ' ' || line.front() == '\t') return *why = "obs-fold", false;
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return *why = "header without colon", false;
  std::string_view name = line.substr(0, colon);
  if (!isToken(name)) return *why = "bad header name", false;
  std::string_view value = trimOws(line.substr(colon + 1));
  for (char c : value) {
    unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f) {
      return *why = "control character in header value", false;
    }
  }
  out->name = lower(name);
  out->value = std::string(value);
  return true;
}

// Long because it is one pass over the head in wire order (request line,
// fields, then the framing rules of RFC 9112 6.3), every limit beside the
// bytes it bounds.
ParseResult parseRequestHead(std::string_view buf) {
  size_t end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (buf.size() > kMaxHeadBytes) return failWith("head over size cap");
    // A bare LF anywhere already makes the head invalid; fail early.
    for (size_t i = 0; i < buf.size(); ++i) {
      if (buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r')) return failWith("bare LF");
    }
    return {};
  }
  if (end + 4 > kMaxHeadBytes) return failWith("head over size cap");
  std::string_view head = buf.substr(0, end + 2);  // keep the last header's CRLF
  // A CR is only ever the first half of a line end: some parsers treat a
  // bare CR as a line break, so one would split the head differently.
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] == '\r' && head[i + 1] != '\n') return failWith("bare CR");
  }
  ParseResult r;
  r.head.head_bytes = end + 4;
  RequestHead& h = r.head;

  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  head.remove_prefix(eol + 2);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return failWith("malformed request line");
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (!isToken(method) || method.size() > 32) return failWith("bad method");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return failWith("unsupported version");
  // TRACE echoes the request (injected headers included) back to the guest.
  if (method == "CONNECT" || method == "PRI" || method == "TRACE" || method == "TRACK") {
    return failWith("method not proxied");
  }
  if (target.empty() || target.size() > 8192) return failWith("bad target");
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return failWith("bad character in target");
    }
  }
  h.method = method;
  h.target = target;
  h.version = version;

  std::optional<Authority> absolute;
  if (target.front() != '/') {
    if (target == "*" && method == "OPTIONS") {
      // asterisk-form: no authority of its own
    } else if (target.size() > 7 && iequals(target.substr(0, 7), "http://")) {
      std::string_view rest = target.substr(7);
      std::string_view auth = rest.substr(0, rest.find_first_of("/?#"));
      auto a = parseAuthority(auth);
      if (!a.ok()) return failWith("absolute-form authority: " + a.error().context());
      absolute = std::move(*a);
    } else {
      return failWith("target must be origin-form or http absolute-form");
    }
  }

  int host_count = 0, cl_count = 0, te_count = 0;
  std::string host_value;
  while (!head.empty()) {
    eol = head.find("\r\n");
    line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    Header hd;
    std::string why;
    if (!parseHeaderLine(line, &hd, &why)) return failWith(why);
    std::string_view value = hd.value;
    if (h.headers.size() >= kMaxHeaders) return failWith("too many headers");
    if (hd.name == "host") {
      ++host_count;
      host_value = hd.value;
    } else if (hd.name == "content-length") {
      ++cl_count;
      if (!parseDecimal(value, &h.content_length)) return failWith("bad content-length");
    } else if (hd.name == "transfer-encoding") {
      ++te_count;
      if (!iequals(value, "chunked")) return failWith("transfer-encoding other than chunked");
    } else if (hd.name == "upgrade") {
      if (listHas(value, "h2c")) return failWith("h2c upgrade refused");
      if (!iequals(value, "websocket")) return failWith("upgrade other than websocket");
      h.websocket_upgrade = true;
    } else if (hd.name == "connection") {
      if (listHas(value, "upgrade")) h.connection_upgrade = true;
    } else if (hd.name == "expect") {
      // Only 100-continue exists; anything else is refused rather than
      // guessed at (the relay holds the body until the upstream answers).
      if (!iequals(value, "100-continue") || h.expect_continue) return failWith("bad Expect");
      h.expect_continue = true;
    } else if (hd.name == "http2-settings") {
      return failWith("h2c upgrade refused");
    }
    h.headers.push_back(std::move(hd));
  }
  if (host_count != 1) return failWith(host_count == 0 ? "no Host" : "more than one Host");
  auto a = parseAuthority(host_value);
  if (!a.ok()) return failWith("Host: " + a.error().context());
  h.authority = std::move(*a);
  if (absolute) {
    // "http://x/" with no port means 80; Host then must say 80 or nothing.
    uint16_t abs_port = absolute->port.value_or(80);
    uint16_t host_port = h.authority.port.value_or(80);
    if (absolute->name != h.authority.name || abs_port != host_port) {
      return failWith("absolute-form authority differs from Host");
    }
  }
  if (cl_count > 1) return failWith("more than one Content-Length");
  if (te_count > 1) return failWith("more than one Transfer-Encoding");
  if (cl_count && te_count) return failWith("both Content-Length and Transfer-Encoding");
  if (te_count && version == "HTTP/1.0") return failWith("chunked on HTTP/1.0");
  if (te_count) h.body = BodyKind::kChunked;
  if (cl_count && h.content_length > 0) h.body = BodyKind::kLength;
  // Servers commonly ignore a body on these methods and would read it as the
  // next request, which the gateway never checked.
  if (h.body != BodyKind::kNone && (method == "GET" || method == "HEAD" || method == "OPTIONS")) {
    return failWith("body on " + std::string(method));
  }
  if (h.expect_continue && h.body == BodyKind::kNone) return failWith("Expect without a body");
  r.state = State::kDone;
  return r;
}

void RequestHead::removeHeader(std::string_view name) {
  headers.erase(std::remove_if(headers.begin(), headers.end(),
                               [&](const Header& h) { return h.name == name; }),
                headers.end());
}

std::string RequestHead::serialize() const {
  std::string out = method + " " + target + " " + version + "\r\n";
  for (const Header& h : headers) out += h.name + ": " + h.value + "\r\n";
  out += "\r\n";
  return out;
}

BodyTracker::BodyTracker(const RequestHead& head) : BodyTracker(head.body, head.content_length) {}

BodyTracker::BodyTracker(BodyKind kind, uint64_t length) {
  switch (kind) {
    case BodyKind::kNone: state_ = State::kDone; break;
    case BodyKind::kLength:
      state_ = length ? State::kLength : State::kDone;
      remaining_ = length;
      break;
    case BodyKind::kChunked: state_ = State::kChunkSize; break;
    case BodyKind::kUntilClose:
      state_ = State::kLength;
      remaining_ = UINT64_MAX;
      break;
  }
}

void BodyTracker::fail(std::string why) {
  state_ = State::kError;
  error_ = std::move(why);
}

// A complete chunk-size or trailer line is in line_ (CRLF included).
void BodyTracker::endLine() {
  std::string_view l(line_.data(), line_.size() - 2);
  if (l.find('\r') != std::string_view::npos) return fail("bare CR in chunk line");
  if (state_ == State::kTrailer) {
    if (l.empty()) {
      state_ = State::kDone;
      return;
    }
    Header h;
    std::string why;
    if (!parseHeaderLine(l, &h, &why)) return fail("trailer: " + why);
    // Fields that frame or route a message have no business after the body.
    for (const char* f : {"content-length", "transfer-encoding", "host", "trailer", "connection",
                          "upgrade", "expect", "authorization", "proxy-authorization"}) {
      if (h.name == f) return fail("trailer: " + h.name + " not allowed");
    }
    if (trailers_.size() + line_.size() > 8192) return fail("trailers over size cap");
    trailers_.append(line_);
    return;
  }
  // chunk-size [; ext]: hex digits only, bounded; extensions printable.
  size_t semi = l.find(';');
  if (semi != std::string_view::npos) {
    for (char c : l.substr(semi)) {
      unsigned char u = static_cast<unsigned char>(c);
      if ((u < 0x20 && u != '\t') || u == 0x7f) return fail("control byte in chunk extension");
    }
  }
  std::string_view hex = l.substr(0, semi);
  if (hex.empty() || hex.size() > 12) return fail("bad chunk size");
  uint64_t size = 0;
  for (char c : hex) {
    int d = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (d < 0) return fail("bad chunk size");
    size = size * 16 + static_cast<uint64_t>(d);
  }
  remaining_ = size;
  state_ = size == 0 ? State::kTrailer : State::kChunkData;
}

size_t BodyTracker::consume(std::string_view data, std::string* payload) {
  size_t used = 0;
  auto take = [&](size_t n) {
    used += n;
    data.remove_prefix(n);
  };
  while (!data.empty() && state_ != State::kDone && state_ != State::kError) {
    switch (state_) {
      case State::kLength:
      case State::kChunkData: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size()));
        if (payload) payload->append(data.substr(0, n));
        take(n);
        if (remaining_ != UINT64_MAX) remaining_ -= n;
        if (remaining_ == 0) {
          state_ = state_ == State::kLength ? State::kDone : State::kChunkDataCrlf;
          line_.clear();
        }
        break;
      }
      case State::kChunkDataCrlf:
        line_.push_back(data.front());
        take(1);
        if (line_.size() == 2) {
          if (line_ != "\r\n") {
            fail("chunk data not followed by CRLF");
          } else {
            state_ = State::kChunkSize;
          }
          line_.clear();
        }
        break;
      case State::kChunkSize:
      case State::kTrailer: {
        line_.push_back(data.front());
        take(1);
        if (line_.size() > 1024) {
          fail("chunk line over size cap");
          break;
        }
        if (line_.back() != '\n') break;
        if (line_.size() < 2 || line_[line_.size() - 2] != '\r') {
          fail("bare LF in chunk line");
          break;
        }
        endLine();
        line_.clear();
        break;
      }
      case State::kDone:
      case State::kError: break;
    }
  }
  return used;
}

}  // namespace vessel::gateway::http
