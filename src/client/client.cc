#include "client/client.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/http/file_body.hpp>
#include <boost/json.hpp>
#include <charconv>
#include <cstdlib>
#include <fstream>

#include "base/fd.h"

namespace vessel::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
namespace ssl = asio::ssl;

namespace {

constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr size_t kMaxErrorBody = 1 << 20;

Code codeFromName(std::string_view name) {
  for (Code c :
       {Code::kInvalidArgument, Code::kNotFound, Code::kAlreadyExists, Code::kFailedPrecondition,
        Code::kResourceExhausted, Code::kDeadlineExceeded, Code::kUnavailable, Code::kProtocol,
        Code::kPermissionDenied, Code::kUnauthenticated, Code::kInternal})
    if (codeName(c) == name) return c;
  return Code::kInternal;
}

Code codeFromStatus(unsigned status) {
  switch (status) {
    case 400: return Code::kInvalidArgument;
    case 401: return Code::kUnauthenticated;
    case 403: return Code::kPermissionDenied;
    case 404: return Code::kNotFound;
    case 409: return Code::kFailedPrecondition;
    case 413:
    case 429: return Code::kResourceExhausted;
    case 502: return Code::kProtocol;
    case 503: return Code::kUnavailable;
    case 504: return Code::kDeadlineExceeded;
    default: return status >= 500 ? Code::kInternal : Code::kInvalidArgument;
  }
}

std::string seconds(std::chrono::milliseconds t) {
  return std::to_string((t.count() + 999) / 1000) + " s";
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = s.find_first_not_of(' ');
  return i == std::string::npos ? std::string() : s.substr(i);
}

}  // namespace

struct Client::Conn {
  asio::io_context io;
  beast::tcp_stream tcp{io};  // the connection, or the TLS stream's lower layer
  std::unique_ptr<ssl::context> ctx;
  std::unique_ptr<ssl::stream<beast::tcp_stream&>> tls;  // https:// only
  beast::flat_buffer buf;
  std::optional<http::response_parser<http::buffer_body>> sse;

  // Runs one asynchronous operation on the connection's stream (TLS or
  // plain: `start(stream, handler)`) to completion, bounded by `t` (0: no
  // bound). Synchronous Beast calls cannot time out; these can.
  template <typename Start>
  boost::system::error_code run(Start start, std::chrono::milliseconds t) {
    if (t.count() > 0)
      tcp.expires_after(t);
    else
      tcp.expires_never();
    boost::system::error_code out = asio::error::would_block;
    auto done = [&out](boost::system::error_code ec, auto&&...) { out = ec; };
    if (tls)
      start(*tls, done);
    else
      start(tcp, done);
    io.restart();
    io.run();
    return out;
  }
  ~Conn() {
    // No TLS close_notify: the request or stream is over either way.
    boost::system::error_code ec;
    tcp.socket().shutdown(tcp::socket::shutdown_both, ec);
    tcp.socket().close(ec);
  }
};

Result<Url> parseUrl(std::string_view url) {
  auto bad = [&](const std::string& why) {
    return Error(Code::kInvalidArgument, "API URL '" + std::string(url) + "': " + why);
  };
  Url u;
  std::string_view rest;
  if (url.substr(0, 7) == "http://") {
    rest = url.substr(7);
  } else if (url.substr(0, 8) == "https://") {
    rest = url.substr(8);
    u.tls = true;
    u.port = 443;
  } else {
    return bad("must start with http:// or https://");
  }
  auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    u.base_path = std::string(rest.substr(slash));
    while (!u.base_path.empty() && u.base_path.back() == '/') u.base_path.pop_back();
  }
  if (authority.empty()) return bad("no host");
  if (authority.find('@') != std::string_view::npos) return bad("credentials in the URL");
  // "[v6]:port" or "host:port"; the port is optional.
  size_t host_end = authority.size();
  if (authority.front() == '[') {
    host_end = authority.find(']');
    if (host_end == std::string_view::npos) return bad("unclosed [");
    ++host_end;
  } else if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host_end = colon;
  }
  if (host_end < authority.size()) {
    if (authority[host_end] != ':') return bad("junk after the host");
    std::string_view port = authority.substr(host_end + 1);
    unsigned v = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
    if (ec != std::errc() || p != port.data() + port.size() || v == 0 || v > 65535)
      return bad("bad port");
    u.port = static_cast<uint16_t>(v);
    authority = authority.substr(0, host_end);
  }
  if (authority.size() >= 2 && authority.front() == '[' && authority.back() == ']')
    authority = authority.substr(1, authority.size() - 2);
  if (authority.empty()) return bad("no host");
  u.host = std::string(authority);
  return u;
}

ClientOptions optionsFromEnv() {
  ClientOptions o;
  if (const char* u = std::getenv("VESSEL_API_URL"); u && *u) o.url = u;
  if (const char* ca = std::getenv("VESSEL_CA_FILE"); ca && *ca) o.ca_file = ca;
  if (const char* k = std::getenv("VESSEL_API_KEY"); k && *k) {
    o.token = k;
  } else {
    const char* sd = std::getenv("VESSEL_STATE_DIR");
    std::ifstream f(std::string(sd && *sd ? sd : "/var/lib/vessel") + "/dev-api-key");
    std::string line;
    if (f && std::getline(f, line)) o.token = trim(line);
  }
  return o;
}

Error errorFromResponse(const HttpResponse& r) {
  boost::system::error_code ec;
  json::value v = json::parse(r.body, ec);
  if (!ec && v.is_object()) {
    const auto& o = v.as_object();
    auto c = o.find("code");
    auto m = o.find("message");
    if (c != o.end() && c->value().is_string() && m != o.end() && m->value().is_string())
      return Error(codeFromName(c->value().as_string()), std::string(m->value().as_string()));
  }
  std::string excerpt = r.body.substr(0, 200);
  return Error(codeFromStatus(r.status),
               "HTTP " + std::to_string(r.status) + (excerpt.empty() ? "" : ": " + trim(excerpt)));
}

Client::Client(ClientOptions o) : opts_(std::move(o)), url_(parseUrl(opts_.url)) {}
Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

Error Client::unreachable(std::string_view what, const std::string& why) const {
  return Error(Code::kUnavailable, "cannot reach the Vessel API at " + opts_.url + " (" +
                                       std::string(what) + ": " + why +
                                       "); is vesseld running? VESSEL_API_URL sets the address");
}

Result<std::unique_ptr<Client::Conn>> Client::connect() {
  if (!url_.ok()) return url_.error();
  auto c = std::make_unique<Conn>();
  tcp::resolver resolver(c->io);
  boost::system::error_code ec;
  auto eps = resolver.resolve(url_->host, std::to_string(url_->port), ec);
  if (ec) return unreachable("resolve " + url_->host, ec.message());
  ec = c->run([&](auto&, auto h) { c->tcp.async_connect(eps, std::move(h)); }, opts_.timeout);
  if (ec == beast::error::timeout)
    return unreachable("connect", "no answer within " + seconds(opts_.timeout));
  if (ec) return unreachable("connect", ec.message());
  if (url_->tls) VESSEL_TRY(handshake(*c));
  return c;
}

// The server is verified against --ca-file / VESSEL_CA_FILE, else the
// system's trust store, for the URL's host name or IP address.
Status Client::handshake(Conn& c) const {
  c.ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(c.ctx->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  if (!opts_.ca_file.empty()) {
    auto pem = readFile(opts_.ca_file, 4 << 20);
    if (!pem.ok())
      return std::move(pem).error().withContext("CA file (--ca-file or VESSEL_CA_FILE)");
    c.ctx->add_certificate_authority(asio::buffer(*pem), ec);
    if (ec)
      return Error(Code::kInvalidArgument, "CA file " + opts_.ca_file +
                                               ": no PEM certificate in it (" + ec.message() + ")");
  } else {
    c.ctx->set_default_verify_paths(ec);
  }
  c.ctx->set_verify_mode(ssl::verify_peer);
  c.tls = std::make_unique<ssl::stream<beast::tcp_stream&>>(c.tcp, *c.ctx);
  SSL* s = c.tls->native_handle();
  boost::system::error_code ipec;
  (void)asio::ip::make_address(url_->host, ipec);
  if (ipec) {
    SSL_set_tlsext_host_name(s, url_->host.c_str());
    SSL_set1_host(s, url_->host.c_str());
  } else {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), url_->host.c_str());
  }
  ec = c.run([&](auto&, auto h) { c.tls->async_handshake(ssl::stream_base::client, std::move(h)); },
             opts_.timeout);
  if (!ec) return okStatus();
  long verdict = SSL_get_verify_result(s);
  if (verdict != X509_V_OK)
    return Error(
        Code::kUnauthenticated,
        "the TLS certificate of " + opts_.url + " is not trusted (" +
            X509_verify_cert_error_string(verdict) + "); " +
            (opts_.ca_file.empty() ? std::string("pass the CA that signed it with --ca-file or "
                                                 "VESSEL_CA_FILE")
                                   : "it was checked against " + opts_.ca_file +
                                         ", which is not the CA that signed it"));
  if (ec == beast::error::timeout)
    return unreachable("TLS handshake", "no answer within " + seconds(opts_.timeout));
  return unreachable("TLS handshake", ec.message());
}

template <typename Req>
Status Client::prepare(Req& req, std::string_view method, std::string_view path,
                       const std::string& content_type, const Headers& headers) const {
  http::verb verb = http::string_to_verb(method);
  if (verb == http::verb::unknown)
    return Error(Code::kInvalidArgument, "unknown HTTP method " + std::string(method));
  req.method(verb);
  req.target(url_->base_path + std::string(path));
  req.version(11);
  req.set(http::field::host, url_->host + ":" + std::to_string(url_->port));
  req.set(http::field::user_agent, "vessel-client/" VESSEL_VERSION);
  if (!opts_.token.empty()) req.set(http::field::authorization, "Bearer " + opts_.token);
  if (!content_type.empty()) req.set(http::field::content_type, content_type);
  for (const auto& [k, v] : headers) req.set(k, v);
  req.keep_alive(false);
  return okStatus();
}

namespace {

HttpResponse toResponse(http::response<http::string_body> res) {
  HttpResponse out;
  out.status = res.result_int();
  out.content_type = std::string(res[http::field::content_type]);
  out.body = std::move(res.body());
  return out;
}

Error sendError(boost::system::error_code ec, std::string_view method, std::string_view path,
                std::chrono::milliseconds timeout) {
  std::string where = std::string(method) + " " + std::string(path);
  if (ec == beast::error::timeout)
    return Error(Code::kDeadlineExceeded, where + ": sending took over " + seconds(timeout));
  return Error(Code::kUnavailable, where + ": send: " + ec.message());
}

}  // namespace

Status Client::send(Conn& c, std::string_view method, std::string_view path, std::string body,
                    std::string content_type, const Headers& headers) {
  http::request<http::string_body> req;
  VESSEL_TRY(prepare(req, method, path, content_type, headers));
  req.body() = std::move(body);
  req.prepare_payload();
  auto ec = c.run([&](auto& s, auto h) { http::async_write(s, req, std::move(h)); }, opts_.timeout);
  if (ec) return sendError(ec, method, path, opts_.timeout);
  return okStatus();
}

template <typename Parser>
Result<HttpResponse> Client::finishSmall(Conn& c, Parser&& head, const std::string& where) {
  http::response_parser<http::string_body> p(std::move(head));
  p.body_limit(1 << 20);
  auto ec =
      c.run([&](auto& s, auto h) { http::async_read(s, c.buf, p, std::move(h)); }, opts_.timeout);
  if (ec) return Error(Code::kUnavailable, where + ": reading the answer: " + ec.message());
  return toResponse(p.release());
}

Result<HttpResponse> Client::sendFile(std::string_view method, std::string_view path,
                                      const std::string& local, std::string content_type,
                                      std::chrono::milliseconds timeout) {
  http::request<http::file_body> req;
  VESSEL_TRY(prepare(req, method, path, content_type, {}));
  boost::system::error_code ec;
  req.body().open(local.c_str(), beast::file_mode::scan, ec);
  if (ec) return Error(Code::kNotFound, "open " + local + ": " + ec.message());
  req.prepare_payload();
  VESSEL_ASSIGN_OR_RETURN(auto c, connect());
  ec = c->run([&](auto& s, auto h) { http::async_write(s, req, std::move(h)); }, timeout);
  // The server may answer (413, 404) before it has read the whole body.
  if (ec && ec != boost::asio::error::broken_pipe && ec != boost::asio::error::connection_reset)
    return sendError(ec, method, path, timeout);
  http::response_parser<http::empty_body> head;
  head.header_limit(static_cast<uint32_t>(kMaxHeaderBytes));
  std::string where = std::string(method) + " " + std::string(path);
  auto rec =
      c->run([&](auto& s, auto h) { http::async_read_header(s, c->buf, head, std::move(h)); },
             opts_.timeout);
  if (rec) {
    if (ec) return sendError(ec, method, path, timeout);
    return Error(Code::kUnavailable, where + ": reading the answer: " + rec.message());
  }
  return finishSmall(*c, std::move(head), where);
}

Result<HttpResponse> Client::receiveFile(std::string_view path, const std::string& local,
                                         std::chrono::milliseconds timeout) {
  VESSEL_ASSIGN_OR_RETURN(auto c, connect());
  VESSEL_TRY(send(*c, "GET", path, {}, {}, {}));
  std::string where = "GET " + std::string(path);
  http::response_parser<http::file_body> p;
  p.header_limit(static_cast<uint32_t>(kMaxHeaderBytes));
  p.body_limit(opts_.max_response_bytes);
  auto ec = c->run([&](auto& s, auto h) { http::async_read_header(s, c->buf, p, std::move(h)); },
                   opts_.timeout);
  if (ec) return Error(Code::kUnavailable, where + ": reading the answer: " + ec.message());
  int status = p.get().result_int();
  if (status < 200 || status > 299) return finishSmall(*c, std::move(p), where);
  p.get().body().open(local.c_str(), beast::file_mode::write, ec);
  if (ec) return Error(Code::kInternal, "create " + local + ": " + ec.message());
  ec = c->run([&](auto& s, auto h) { http::async_read(s, c->buf, p, std::move(h)); }, timeout);
  if (ec == beast::error::timeout)
    return Error(Code::kDeadlineExceeded, where + ": not done within " + seconds(timeout));
  if (ec == http::error::body_limit)
    return Error(Code::kResourceExhausted,
                 where + ": larger than " + std::to_string(opts_.max_response_bytes) + " bytes");
  if (ec) return Error(Code::kUnavailable, where + ": reading the answer: " + ec.message());
  HttpResponse out;
  out.status = status;
  out.content_type = std::string(p.get()[http::field::content_type]);
  return out;
}

Result<HttpResponse> Client::request(std::string_view method, std::string_view path,
                                     std::string body, std::string content_type,
                                     const Headers& headers) {
  VESSEL_ASSIGN_OR_RETURN(auto c, connect());
  VESSEL_TRY(send(*c, method, path, std::move(body), std::move(content_type), headers));
  http::response_parser<http::string_body> p;
  p.header_limit(static_cast<uint32_t>(kMaxHeaderBytes));
  p.body_limit(opts_.max_response_bytes);
  auto ec =
      c->run([&](auto& s, auto h) { http::async_read(s, c->buf, p, std::move(h)); }, opts_.timeout);
  std::string where = std::string(method) + " " + std::string(path);
  if (ec == beast::error::timeout)
    return Error(Code::kDeadlineExceeded, where + ": no answer within " + seconds(opts_.timeout));
  if (ec == http::error::body_limit)
    return Error(Code::kResourceExhausted, where + ": response larger than " +
                                               std::to_string(opts_.max_response_bytes) + " bytes");
  if (ec) return Error(Code::kUnavailable, where + ": reading the answer: " + ec.message());
  return toResponse(p.release());
}

namespace {

Result<json::value> jsonResult(Result<HttpResponse> r, std::string_view where) {
  if (!r.ok()) return std::move(r).error();
  if (r->status < 200 || r->status > 299) return errorFromResponse(*r);
  if (r->body.empty()) return json::value(nullptr);
  auto v = parseJson(r->body);
  if (!v.ok()) return std::move(v).error().withContext(where);
  return v;
}

}  // namespace

Result<json::value> Client::get(std::string_view path) {
  return jsonResult(request("GET", path), "GET " + std::string(path));
}

Result<json::value> Client::post(std::string_view path, const json::value& body) {
  return jsonResult(request("POST", path, json::serialize(body), "application/json"),
                    "POST " + std::string(path));
}

Result<json::value> Client::put(std::string_view path, const json::value& body) {
  return jsonResult(request("PUT", path, json::serialize(body), "application/json"),
                    "PUT " + std::string(path));
}

Result<json::value> Client::del(std::string_view path) {
  return jsonResult(request("DELETE", path), "DELETE " + std::string(path));
}

Result<EventStream> Client::stream(std::string_view method, std::string_view path, std::string body,
                                   const Headers& headers, std::chrono::milliseconds idle_timeout) {
  VESSEL_ASSIGN_OR_RETURN(auto c, connect());
  Headers h = headers;
  h.emplace_back("Accept", "text/event-stream");
  std::string ct = body.empty() ? "" : "application/json";
  VESSEL_TRY(send(*c, method, path, std::move(body), ct, h));
  std::string where = std::string(method) + " " + std::string(path);
  auto& p = c->sse.emplace();
  p.header_limit(static_cast<uint32_t>(kMaxHeaderBytes));
  p.body_limit(boost::none);  // a stream has no end we could know
  auto ec = c->run([&](auto& s, auto h) { http::async_read_header(s, c->buf, p, std::move(h)); },
                   opts_.timeout);
  if (ec == beast::error::timeout)
    return Error(Code::kDeadlineExceeded, where + ": no answer within " + seconds(opts_.timeout));
  if (ec) return Error(Code::kUnavailable, where + ": reading the answer: " + ec.message());
  unsigned status = p.get().result_int();
  if (status < 200 || status > 299) {
    // Read the (bounded) error body before judging it.
    HttpResponse r;
    r.status = status;
    char tmp[8192];
    while (!p.is_done() && r.body.size() < kMaxErrorBody) {
      p.get().body().data = tmp;
      p.get().body().size = sizeof tmp;
      ec = c->run([&](auto& s, auto h) { http::async_read_some(s, c->buf, p, std::move(h)); },
                  opts_.timeout);
      r.body.append(tmp, sizeof tmp - p.get().body().size);
      if (ec && ec != http::error::need_buffer) break;
    }
    return errorFromResponse(r);
  }
  std::string_view ctype = p.get()[http::field::content_type];
  if (ctype.substr(0, 17) != "text/event-stream")
    return Error(Code::kProtocol,
                 where + ": expected text/event-stream, got '" + std::string(ctype) + "'");
  return EventStream(std::move(c), idle_timeout, where);
}

EventStream::EventStream(std::unique_ptr<Client::Conn> c, std::chrono::milliseconds idle,
                         std::string where)
    : conn_(std::move(c)), idle_(idle), where_(std::move(where)) {}
EventStream::EventStream(EventStream&&) noexcept = default;
EventStream& EventStream::operator=(EventStream&&) noexcept = default;
EventStream::~EventStream() = default;

void EventStream::close() {
  conn_.reset();
  ended_ = true;
}

Result<std::optional<SseEvent>> EventStream::next() {
  char tmp[16384];
  for (;;) {
    if (auto e = parser_.next()) return std::optional<SseEvent>(std::move(*e));
    if (ended_ || !conn_) return std::optional<SseEvent>();
    auto& p = *conn_->sse;
    if (p.is_done()) {
      ended_ = true;
      continue;
    }
    p.get().body().data = tmp;
    p.get().body().size = sizeof tmp;
    auto ec = conn_->run(
        [&](auto& s, auto h) { http::async_read_some(s, conn_->buf, p, std::move(h)); }, idle_);
    size_t got = sizeof tmp - p.get().body().size;
    if (got > 0) VESSEL_TRY_CTX(parser_.feed(std::string_view(tmp, got)), where_);
    if (ec == http::error::need_buffer) continue;
    if (ec == http::error::end_of_stream || ec == asio::error::eof || p.is_done()) {
      ended_ = true;
      continue;
    }
    if (ec == beast::error::timeout)
      return Error(Code::kDeadlineExceeded, where_ + ": nothing received for " + seconds(idle_));
    if (ec) return Error(Code::kUnavailable, where_ + ": stream broke: " + ec.message());
  }
}

const json::value* field(const json::value& v, std::string_view key) {
  if (!v.is_object()) return nullptr;
  auto it = v.as_object().find(key);
  return it == v.as_object().end() ? nullptr : &it->value();
}

std::string str(const json::value& v, std::string_view key) {
  const json::value* f = field(v, key);
  return f && f->is_string() ? std::string(f->as_string()) : std::string();
}

int64_t num(const json::value& v, std::string_view key) {
  const json::value* f = field(v, key);
  if (!f) return 0;
  if (f->is_int64()) return f->as_int64();
  if (f->is_uint64()) return static_cast<int64_t>(f->as_uint64());
  if (f->is_double()) return static_cast<int64_t>(f->as_double());
  return 0;
}

Result<json::value> parseJson(std::string_view text) {
  json::parse_options po;
  po.max_depth = 64;
  boost::system::error_code ec;
  json::value v = json::parse(text, ec, {}, po);
  if (ec) return Error(Code::kProtocol, "response is not JSON: " + ec.message());
  return v;
}

}  // namespace vessel::client
