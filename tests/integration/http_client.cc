#include "http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace vessel::testing {

namespace json = boost::json;

json::value Reply::js() const {
  boost::system::error_code ec;
  auto v = json::parse(body, ec);
  return ec ? json::value() : v;
}

std::string Reply::header(const std::string& name) const {
  size_t pos = 0;
  while ((pos = head.find("\r\n", pos)) != std::string::npos) {
    pos += 2;
    auto colon = head.find(':', pos);
    auto eol = head.find("\r\n", pos);
    if (colon == std::string::npos || (eol != std::string::npos && colon > eol)) continue;
    if (colon - pos == name.size() &&
        ::strncasecmp(head.data() + pos, name.data(), name.size()) == 0) {
      auto v = head.substr(colon + 1, (eol == std::string::npos ? head.size() : eol) - colon - 1);
      while (!v.empty() && v.front() == ' ') v.erase(0, 1);
      return v;
    }
  }
  return "";
}

std::unique_ptr<HttpStream> HttpStream::open(uint16_t port, const Request& req) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  std::unique_ptr<HttpStream> s(new HttpStream(fd));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return nullptr;
  if (req.deadline) s->deadline_ = std::chrono::steady_clock::now() + *req.deadline;
  if (!s->armTimeout()) return s;
  std::string r =
      req.method + " " + req.target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!req.bearer.empty()) r += "Authorization: Bearer " + req.bearer + "\r\n";
  for (const auto& h : req.headers) r += h + "\r\n";
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT") {
    if (req.json) r += "Content-Type: application/json\r\n";
    if (req.chunked)
      r += "Transfer-Encoding: chunked\r\n";
    else
      r += "Content-Length: " + std::to_string(req.body.size()) + "\r\n";
  }
  r += "\r\n";
  if (req.chunked) {
    char size[32];
    for (size_t at = 0; at < req.body.size(); at += 65536) {
      size_t n = std::min<size_t>(65536, req.body.size() - at);
      std::snprintf(size, sizeof size, "%zx\r\n", n);
      r += size;
      r.append(req.body, at, n);
      r += "\r\n";
    }
    r += "0\r\n\r\n";
  } else {
    r += req.body;
  }
  size_t off = 0;
  while (off < r.size() && s->armTimeout()) {
    ssize_t n = ::send(fd, r.data() + off, r.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer (e.g. 413) before reading everything
    off += static_cast<size_t>(n);
  }
  return s;
}

HttpStream::~HttpStream() { close(); }

bool HttpStream::armTimeout() {
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(
      deadline_ ? *deadline_ - std::chrono::steady_clock::now() : std::chrono::seconds(120));
  if (left.count() <= 0) return false;
  timeval tv{static_cast<time_t>(left.count() / 1000000),
             static_cast<suseconds_t>(left.count() % 1000000)};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return true;
}

void HttpStream::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void HttpStream::parseHead() {
  auto hdr = raw_.find("\r\n\r\n");
  if (hdr == std::string::npos || raw_.size() < 12) return;
  // Skip interim responses (100 Continue).
  if (raw_.compare(9, 3, "100") == 0) {
    raw_.erase(0, hdr + 4);
    return parseHead();
  }
  reply_.status = std::stoi(raw_.substr(9, 3));
  reply_.head = raw_.substr(0, hdr);
  reply_.body = raw_.substr(hdr + 4);
}

bool HttpStream::readUntil(const std::function<bool(const std::string&)>& enough) {
  char buf[65536];
  for (;;) {
    parseHead();
    if (reply_.status && enough && enough(reply_.body)) return true;
    if (fd_ < 0 || !armTimeout()) return false;
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) {
      parseHead();
      return reply_.status && enough && enough(reply_.body);
    }
    raw_.append(buf, static_cast<size_t>(n));
  }
}

void HttpStream::readAll() {
  readUntil([](const std::string&) { return false; });
}

uint64_t HttpStream::discardBody(uint64_t max_body, const std::function<void(uint64_t)>& progress) {
  if (!readUntil([](const std::string&) { return true; })) return 0;
  uint64_t total = reply_.body.size();
  reply_.body.clear();
  raw_.clear();
  std::vector<char> buf(1 << 20);
  while (total < max_body && fd_ >= 0 && armTimeout()) {
    ssize_t n = ::read(fd_, buf.data(), std::min<uint64_t>(buf.size(), max_body - total));
    if (n <= 0) break;
    total += static_cast<uint64_t>(n);
    if (progress) progress(total);
  }
  return total;
}

Reply call(uint16_t port, const Request& req) {
  auto s = HttpStream::open(port, req);
  if (!s) return {};
  s->readAll();
  return s->reply();
}

std::vector<SseEvent> parseSse(const std::string& body) {
  std::vector<SseEvent> out;
  size_t pos = 0;
  for (;;) {
    auto end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string block = body.substr(pos, end - pos);
    pos = end + 2;
    SseEvent e;
    size_t lp = 0;
    while (lp < block.size()) {
      auto nl = block.find('\n', lp);
      std::string line = block.substr(lp, nl == std::string::npos ? std::string::npos : nl - lp);
      lp = nl == std::string::npos ? block.size() : nl + 1;
      if (line.rfind("id: ", 0) == 0) e.id = std::stoll(line.substr(4));
      if (line.rfind("event: ", 0) == 0) e.type = line.substr(7);
      if (line.rfind("data: ", 0) == 0) {
        boost::system::error_code ec;
        e.data = json::parse(line.substr(6), ec);
      }
    }
    if (!e.type.empty()) out.push_back(std::move(e));
  }
  return out;
}

std::optional<std::string> dechunk(const std::string& body) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    auto eol = body.find("\r\n", pos);
    if (eol == std::string::npos) return std::nullopt;
    size_t n = std::stoul(body.substr(pos, eol - pos), nullptr, 16);
    pos = eol + 2;
    if (n == 0) return out;
    if (pos + n + 2 > body.size()) return std::nullopt;
    out.append(body, pos, n);
    pos += n + 2;
  }
}

std::string unbase64(const std::string& s) {
  std::string out(s.size() / 4 * 3 + 3, '\0');
  int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  if (n < 0) return "<bad base64>";
  size_t pad = 0;
  if (!s.empty() && s.back() == '=') pad = (s.size() > 1 && s[s.size() - 2] == '=') ? 2 : 1;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string str(const json::value& v, const char* k) {
  if (!v.is_object() || !v.as_object().contains(k) || !v.at(k).is_string()) return "<missing>";
  return std::string(v.at(k).as_string());
}

}  // namespace vessel::testing
