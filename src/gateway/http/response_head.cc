#include "gateway/http/response_head.h"

namespace vessel::gateway::http {

namespace {

using State = ResponseParse::State;

ResponseParse failWith(std::string why) {
  ResponseParse r;
  r.state = State::kError;
  r.error = "http response: " + std::move(why);
  return r;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Comma-separated tokens, lowercased and trimmed.
std::vector<std::string> tokens(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) out.push_back(lower(item));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

ResponseParse parseResponseHead(std::string_view buf, std::string_view request_method) {
  size_t end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (buf.size() > kMaxResponseHeadBytes) return failWith("head over size cap");
    return {};
  }
  if (end + 4 > kMaxResponseHeadBytes) return failWith("head over size cap");
  std::string_view head = buf.substr(0, end + 2);
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] == '\r' && head[i + 1] != '\n') return failWith("bare CR");
    if (head[i] == '\n' && (i == 0 || head[i - 1] != '\r')) return failWith("bare LF");
  }
  ResponseParse r;
  ResponseHead& h = r.head;
  h.head_bytes = end + 4;
  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  head.remove_prefix(eol + 2);
  // "HTTP/1.1 200 OK": version, three digits, then an optional reason.
  if (line.size() < 12 || (line.substr(0, 9) != "HTTP/1.1 " && line.substr(0, 9) != "HTTP/1.0 ") ||
      (line.size() > 12 && line[12] != ' ')) {
    return failWith("malformed status line");
  }
  for (size_t i = 9; i < 12; ++i) {
    if (line[i] < '0' || line[i] > '9') return failWith("malformed status code");
    h.status = h.status * 10 + (line[i] - '0');
  }
  if (h.status < 100) return failWith("malformed status code");
  int cl_count = 0;
  std::vector<std::string> te;
  while (!head.empty()) {
    eol = head.find("\r\n");
    line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    Header hd;
    std::string why;
    if (!parseHeaderLine(line, &hd, &why)) return failWith(why);
    if (h.headers.size() >= 2 * kMaxHeaders) return failWith("too many headers");
    if (hd.name == "content-length") {
      ++cl_count;
      uint64_t v = 0;
      if (hd.value.empty() || hd.value.size() > 15) return failWith("bad content-length");
      for (char c : hd.value) {
        if (c < '0' || c > '9') return failWith("bad content-length");
        v = v * 10 + static_cast<uint64_t>(c - '0');
      }
      h.content_length = v;
    } else if (hd.name == "transfer-encoding") {
      for (auto& t : tokens(hd.value)) te.push_back(std::move(t));
    } else if (hd.name == "upgrade") {
      for (const auto& t : tokens(hd.value)) h.upgrade_websocket |= t == "websocket";
    } else if (hd.name == "connection") {
      for (const auto& t : tokens(hd.value)) h.connection_upgrade |= t == "upgrade";
    } else if (hd.name == "content-encoding") {
      for (const auto& t : tokens(hd.value)) {
        if (t != "identity") h.content_encoding += (h.content_encoding.empty() ? "" : ",") + t;
      }
    }
    h.headers.push_back(std::move(hd));
  }
  if (cl_count > 1) return failWith("more than one Content-Length");
  if (cl_count && !te.empty()) return failWith("both Content-Length and Transfer-Encoding");
  if (h.interim() || h.status == 204 || h.status == 304 || request_method == "HEAD") {
    h.body = BodyKind::kNone;
  } else if (!te.empty()) {
    h.body = te.back() == "chunked" ? BodyKind::kChunked : BodyKind::kUntilClose;
  } else if (cl_count) {
    h.body = BodyKind::kLength;
  } else {
    h.body = BodyKind::kUntilClose;
  }
  r.state = State::kDone;
  return r;
}

}  // namespace vessel::gateway::http
