#pragma once
// A synchronous client for Vessel's HTTP API, for the CLI and tests: one
// TCP connection per request (the API is local; nothing to pool), bounded
// waits, and errors that say what to do. A non-2xx answer becomes an Error
// carrying the server's `{code, message}`; a server that cannot be reached
// becomes kUnavailable naming the URL. Streams of Server-Sent Events (the
// control plane's operation events, the data plane's exec output) are read
// one event at a time through EventStream.
//
// Not thread-safe: one Client per thread (it owns its io_context).
#include <boost/json/value.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "client/sse_parser.h"

namespace vessel::client {

// "http://host[:port][/prefix]" or "https://..." (the server verified,
// ClientOptions::ca_file).
struct Url {
  bool tls = false;
  std::string host;
  uint16_t port = 80;     // 443 for https:// without a port
  std::string base_path;  // "" or "/prefix" without a trailing slash
};
Result<Url> parseUrl(std::string_view url);

struct ClientOptions {
  std::string url = "http://127.0.0.1:8080";
  std::string token;  // sent as "Authorization: Bearer <token>" when not empty
  // https:// URLs: the PEM CA certificate(s) the server's certificate must
  // chain to; "" is the system's trust store.
  std::string ca_file;
  // Bounds connecting, sending a request and receiving a whole response.
  std::chrono::milliseconds timeout{60000};
  size_t max_response_bytes = 64 << 20;
};

// VESSEL_API_URL (default http://127.0.0.1:8080), VESSEL_CA_FILE and
// VESSEL_API_KEY. Without
// a key it falls back to the development key `make up` writes,
// $VESSEL_STATE_DIR/dev-api-key (default /var/lib/vessel), when readable.
ClientOptions optionsFromEnv();

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpResponse {
  unsigned status = 0;
  std::string content_type;
  std::string body;
};

// The Error a non-2xx response stands for: the body's {code, message} when
// it has them, otherwise a code chosen from the status.
Error errorFromResponse(const HttpResponse& r);

class EventStream;

class Client {
 public:
  explicit Client(ClientOptions o);
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;

  const ClientOptions& options() const { return opts_; }

  // JSON in, JSON out; a non-2xx answer is an Error. Paths are relative to
  // the URL's prefix, e.g. "/v1/sandboxes". An empty 2xx body is `null`.
  Result<boost::json::value> get(std::string_view path);
  Result<boost::json::value> post(std::string_view path, const boost::json::value& body);
  Result<boost::json::value> put(std::string_view path, const boost::json::value& body);
  Result<boost::json::value> del(std::string_view path);

  // Any request; the status is returned, not judged. `method` is an HTTP
  // verb in upper case ("GET", "PUT", ...).
  Result<HttpResponse> request(std::string_view method, std::string_view path,
                               std::string body = {}, std::string content_type = {},
                               const Headers& headers = {});

  // Files, streamed: neither side is ever held in memory whole. `timeout`
  // bounds the whole transfer (callers scale it with the size).
  // PUT (or `method`) with the file at `local` as the body.
  Result<HttpResponse> sendFile(std::string_view method, std::string_view path,
                                const std::string& local, std::string content_type,
                                std::chrono::milliseconds timeout);
  // GET into the file `local` (created or truncated) when the answer is
  // 2xx; otherwise nothing is written and the answer's body is returned.
  Result<HttpResponse> receiveFile(std::string_view path, const std::string& local,
                                   std::chrono::milliseconds timeout);

  // Opens a stream of Server-Sent Events. A non-2xx answer is an Error.
  // `idle_timeout` bounds the wait for each read (0: wait forever); the
  // control plane sends a keepalive every 15 s.
  Result<EventStream> stream(std::string_view method, std::string_view path, std::string body = {},
                             const Headers& headers = {},
                             std::chrono::milliseconds idle_timeout = std::chrono::seconds(60));

  struct Conn;  // a connected socket and its buffer (client.cc)

 private:
  Result<std::unique_ptr<Conn>> connect();
  Status handshake(Conn& c) const;
  Status send(Conn& c, std::string_view method, std::string_view path, std::string body,
              std::string content_type, const Headers& headers);
  // The request line and headers every request carries.
  template <typename Req>
  Status prepare(Req& req, std::string_view method, std::string_view path,
                 const std::string& content_type, const Headers& headers) const;
  // Reads the rest of an answer whose head `p` holds (an error's body).
  template <typename Parser>
  Result<HttpResponse> finishSmall(Conn& c, Parser&& p, const std::string& where);
  Error unreachable(std::string_view what, const std::string& why) const;

  ClientOptions opts_;
  Result<Url> url_;
};

// The events of one response, in order. next() returns nullopt once the
// server ended the stream.
class EventStream {
 public:
  EventStream(EventStream&&) noexcept;
  EventStream& operator=(EventStream&&) noexcept;
  ~EventStream();

  Result<std::optional<SseEvent>> next();
  // The id of the last event read, for a reconnect's Last-Event-ID.
  const std::string& lastEventId() const { return parser_.lastEventId(); }
  // Shuts the connection; next() then ends.
  void close();

 private:
  friend class Client;
  EventStream(std::unique_ptr<Client::Conn> c, std::chrono::milliseconds idle, std::string where);

  std::unique_ptr<Client::Conn> conn_;
  std::chrono::milliseconds idle_;
  std::string where_;  // "GET /v1/events" for error messages
  SseParser parser_;
  bool ended_ = false;
};

// Small JSON accessors for responses: absent or mistyped fields read as
// empty/zero, since the shapes are the server's contract (api/openapi.yaml).
std::string str(const boost::json::value& v, std::string_view key);
int64_t num(const boost::json::value& v, std::string_view key);
const boost::json::value* field(const boost::json::value& v, std::string_view key);
// Parses `text` as JSON (bounded depth); kProtocol when it is not.
Result<boost::json::value> parseJson(std::string_view text);

}  // namespace vessel::client
