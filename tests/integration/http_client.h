#pragma once
// A small blocking HTTP/1.1 client for the integration tests that talk to a
// real vesseld: one request per connection, every read bounded by a socket
// timeout so a hung server fails the test instead of hanging it. Streams
// (SSE, chunked downloads) can be read incrementally while other requests
// go out on other connections.
#include <boost/json.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace vessel::testing {

struct Reply {
  int status = 0;
  std::string head, body;
  boost::json::value js() const;
  // The value of a response header (case-insensitive name), or "".
  std::string header(const std::string& name) const;
};

struct SseEvent {
  int64_t id = 0;
  std::string type;
  boost::json::value data;
};

struct Request {
  std::string method = "GET", target = "/";
  std::string body;
  std::string bearer;  // empty: no Authorization header
  std::vector<std::string> headers;
  bool json = true;  // Content-Type: application/json when there is a body
  // The body sent chunked (Transfer-Encoding: chunked, 64 KiB chunks): no
  // Content-Length tells the server its size.
  bool chunked = false;
  // The whole exchange's deadline (send and every read): past it the stream
  // stops reading and the reply is what arrived (status 0 without a head).
  // Unset: each read may wait 120 s, which only keeps a hung server from
  // hanging a test (streams may run far longer).
  std::optional<std::chrono::milliseconds> deadline;
};

// One connection carrying one request; read() accumulates the response.
class HttpStream {
 public:
  static std::unique_ptr<HttpStream> open(uint16_t port, const Request& req);
  ~HttpStream();
  // Reads until `enough(body so far)` holds once the head is in, or the
  // server closes (then returns false unless `enough` holds).
  bool readUntil(const std::function<bool(const std::string&)>& enough);
  // Reads everything until the server closes.
  void readAll();
  // Reads the head (kept), then up to `max_body` bytes of body that are
  // counted and dropped, calling `progress(total)` after each read: for
  // bodies too large to keep. Returns the body bytes read (including any
  // that came with the head).
  uint64_t discardBody(uint64_t max_body, const std::function<void(uint64_t)>& progress);
  const Reply& reply() const { return reply_; }
  // Closes the connection (the client going away).
  void close();

 private:
  explicit HttpStream(int fd) : fd_(fd) {}
  void parseHead();
  // Sets the socket's timeouts to what is left until deadline_; false once
  // it has passed.
  bool armTimeout();
  int fd_ = -1;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  std::string raw_;
  Reply reply_;
};

Reply call(uint16_t port, const Request& req);

// The SSE events in `body`, complete ones only.
std::vector<SseEvent> parseSse(const std::string& body);
// The payload of a chunked body, or nullopt if it is not complete (no last chunk).
std::optional<std::string> dechunk(const std::string& body);
// Base64 decoding (exec output).
std::string unbase64(const std::string& s);
std::string str(const boost::json::value& v, const char* key);

}  // namespace vessel::testing
