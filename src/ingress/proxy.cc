#include "ingress/proxy.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <cerrno>

#include "agentclient/agent_client.h"
#include "http/headers.h"
#include "http/relay.h"

namespace vessel::ingress {

namespace beast = boost::beast;
namespace json = boost::json;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kTok = asio::as_tuple(asio::use_awaitable);
constexpr std::string_view kTokenHeader = "e2b-traffic-access-token";
// How long a guest server may take to finish its answers and close once
// the client moved on to another target.
constexpr std::chrono::seconds kDrain{30};
constexpr uint32_t kMaxHead = 64 * 1024;
// How long a refused port is retried before the 502.
constexpr std::chrono::seconds kRefusedRetry{2};

// The guest connection behind a client connection, and what the coroutine
// relaying its bytes down to the client has seen.
struct Relay {
  explicit Relay(const asio::any_io_executor& ex) : done_event(ex), answered_event(ex) {}
  SandboxHost target;
  Route route;
  std::unique_ptr<agentclient::PortStream> port;
  // The guest's answers, framed: one response per request sent, in order;
  // opaque only after a 101 to a well-formed upgrade (http/relay.h).
  http::ResponseRelay responses;
  bool done = false;  // the guest closed (or failed): nothing more comes down
  bool failed = false;
  bool switching = false;  // the client goes on to another target: keep it open
  bool abandoned = false;  // the client connection is gone: touch it no more
  // What the client side is doing, for the idle watch: reading the next
  // head, reading a body, or neither (writing, switched, ending).
  enum class Phase { kNone, kHead, kBody } phase = Phase::kNone;
  std::chrono::steady_clock::time_point last_active = std::chrono::steady_clock::now();
  bool timed_out = false;
  asio::steady_timer done_event;
  asio::steady_timer idle_timer{done_event.get_executor()};
  // Cancelled whenever a final response ended or the connection switched
  // (what serve() waits on after an upgrade request).
  asio::steady_timer answered_event;
};

asio::awaitable<void> pumpDown(std::shared_ptr<Relay> r, beast::tcp_stream& client) {
  for (;;) {
    auto chunk = co_await r->port->read();
    if (r->abandoned) break;
    if (!chunk.ok() || !*chunk) {
      r->failed = !chunk.ok();
      // A response the guest's close cut short is cut for the client too.
      if (!r->failed && !r->responses.end().ok()) r->failed = true;
      break;
    }
    // Only well-formed responses to requests sent go down (what precedes
    // a framing error still does); a guest that breaks framing is cut.
    r->last_active = std::chrono::steady_clock::now();
    std::string out;
    uint64_t answered = r->responses.answered();
    auto framed = r->responses.feed(**chunk, out);
    if (!out.empty()) {
      auto [ec, n] = co_await asio::async_write(client, asio::buffer(out), kTok);
      if (r->abandoned) break;
      if (ec) {
        r->failed = true;
        break;
      }
    }
    if (!framed.ok()) {
      r->failed = true;
      break;
    }
    if (r->responses.answered() != answered || r->responses.opaque()) r->answered_event.cancel();
  }
  r->done = true;
  r->answered_event.cancel();
  if (!r->abandoned && !r->switching) {
    // The guest ended its side: so does the client's, at once (an HTTP/1.0
    // answer ends with the connection). A reset is passed on as one.
    boost::system::error_code ec;
    if (r->failed)
      client.socket().close(ec);
    else
      client.socket().shutdown(tcp::socket::shutdown_send, ec);
  }
  r->done_event.cancel();
}

asio::awaitable<bool> waitDone(Relay& r, std::chrono::seconds limit) {
  if (r.done) co_return true;
  r.done_event.expires_after(limit);
  co_await r.done_event.async_wait(kTok);
  co_return r.done;
}

// Until the guest answered every request sent (or switched, or closed);
// false when it did not within `limit`.
asio::awaitable<bool> waitAnswered(Relay& r, std::chrono::seconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!r.done && !r.responses.opaque() && r.responses.waiting() > 0) {
    if (std::chrono::steady_clock::now() >= until) co_return false;
    r.answered_event.expires_at(until);
    co_await r.answered_event.async_wait(kTok);
  }
  co_return !r.done || r.responses.opaque();
}

// Closes the client's side of a relay that has gone idle (ProxyLimits):
// re-armed while something is owed to the client or bytes keep moving.
void watchIdle(const std::shared_ptr<Relay>& r, beast::tcp_stream& client, const ProxyLimits& lim) {
  auto now = std::chrono::steady_clock::now();
  bool body = r->phase == Relay::Phase::kBody;
  auto limit = body ? lim.body_idle : lim.idle;
  // A guest still answering is the guest's time, not the client's.
  bool owed = !body && !r->done && r->responses.waiting() > 0;
  auto due = owed ? now + limit : r->last_active + limit;
  r->idle_timer.expires_at(due);
  r->idle_timer.async_wait([r, &client, lim, due](boost::system::error_code ec) {
    if (ec || r->phase == Relay::Phase::kNone || r->abandoned) return;
    auto limit = r->phase == Relay::Phase::kBody ? lim.body_idle : lim.idle;
    bool owed = r->phase == Relay::Phase::kHead && !r->done && r->responses.waiting() > 0;
    if (owed || r->last_active + limit > due) {
      watchIdle(r, client, lim);
      return;
    }
    r->timed_out = true;
    client.cancel();
  });
}

// The phase of the client side while it lasts (the watch stops after it).
struct Watching {
  Watching(const std::shared_ptr<Relay>& r, beast::tcp_stream& client, const ProxyLimits& lim,
           Relay::Phase phase)
      : r_(r) {
    r->phase = phase;
    watchIdle(r, client, lim);
  }
  ~Watching() {
    r_->phase = Relay::Phase::kNone;
    r_->idle_timer.cancel();
  }
  Watching(const Watching&) = delete;
  Watching& operator=(const Watching&) = delete;
  std::shared_ptr<Relay> r_;
};

bool sameBytes(std::string_view got, std::string_view want) {
  if (got.size() != want.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < got.size(); ++i) diff |= static_cast<unsigned char>(got[i] ^ want[i]);
  return diff == 0;
}

bool tokenOk(const Route& route, const http::request_header<>& h) {
  if (route.traffic_token.empty() && !route.accepts) return true;
  // One token header: two could be read differently by two readers.
  if (h.count(kTokenHeader) != 1) return false;
  std::string_view got = h.find(kTokenHeader)->value();
  if (!route.traffic_token.empty() && sameBytes(got, route.traffic_token)) return true;
  return route.accepts && !got.empty() && got.size() <= 512 && route.accepts(got);
}

bool hasBody(const http::request_header<>& h) {
  auto cl = h.find(http::field::content_length);
  if (cl != h.end() && cl->value() != "0") return true;
  return h.find(http::field::transfer_encoding) != h.end();
}

http::Response answer(const http::request_header<>& h, http::status st, json::object body,
                      bool keep_alive) {
  http::Response res{st, h.version()};
  res.set(http::field::content_type, "application/json");
  res.set(http::field::server, "vessel");
  res.keep_alive(keep_alive);
  res.body() = json::serialize(body);
  res.prepare_payload();
  return res;
}

// The request's body, as it arrives, to the guest: a chunked one chunked
// again (the parser hands over its data), any other as it is.
asio::awaitable<bool> forwardBody(beast::tcp_stream& client, beast::flat_buffer& buf,
                                  http::HeadParser& head, agentclient::PortStream& port,
                                  Relay& relay) {
  http::request_parser<http::buffer_body> p(std::move(head));
  p.body_limit(boost::none);
  bool chunked = p.chunked();
  std::string chunk(64 * 1024, '\0');
  while (!p.is_done()) {
    p.get().body().data = chunk.data();
    p.get().body().size = chunk.size();
    auto [ec, n] = co_await http::async_read_some(client, buf, p, kTok);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return false;
    size_t got = chunk.size() - p.get().body().size;
    if (got == 0) continue;
    relay.last_active = std::chrono::steady_clock::now();
    std::string_view data(chunk.data(), got);
    if (chunked) {
      char size[24];
      int len = std::snprintf(size, sizeof size, "%zx\r\n", got);
      std::string framed(size, static_cast<size_t>(len));
      framed.append(data).append("\r\n");
      if (!(co_await port.write(framed)).ok()) co_return false;
    } else if (!(co_await port.write(data)).ok()) {
      co_return false;
    }
  }
  if (chunked && !(co_await port.write("0\r\n\r\n")).ok()) co_return false;
  co_return true;
}

// After an Upgrade: the client's bytes as they are, until it closes.
asio::awaitable<void> rawUp(beast::tcp_stream& client, beast::flat_buffer& buf,
                            agentclient::PortStream& port) {
  if (buf.size() > 0) {
    std::string pending(static_cast<const char*>(buf.data().data()), buf.size());
    buf.consume(buf.size());
    if (!(co_await port.write(pending)).ok()) co_return;
  }
  std::string chunk(64 * 1024, '\0');
  for (;;) {
    auto [ec, n] = co_await client.async_read_some(asio::buffer(chunk), kTok);
    if (ec) break;
    if (!(co_await port.write(std::string_view(chunk.data(), n))).ok()) co_return;
  }
  (void)co_await port.closeWrite();
}

}  // namespace

std::string serializeHead(const http::request_header<>& head, const std::string& mask,
                          uint16_t port) {
  std::string_view target = head.target();
  std::string authority;
  if (!target.empty() && target.front() != '/' && target != "*") {
    // Absolute form: the guest gets its path, and its authority as the Host.
    auto a = http::requestAuthority(head);
    if (a.ok()) authority = *a;
    auto scheme = target.find("://");
    auto path = scheme == std::string_view::npos ? std::string_view::npos
                                                 : target.find_first_of("/?", scheme + 3);
    target = path == std::string_view::npos ? std::string_view("/") : target.substr(path);
  }
  std::string out(head.method_string());
  out += ' ';
  if (!target.empty() && target.front() == '?') out += '/';
  out += target;
  out += head.version() == 10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n";
  for (const auto& f : head) {
    if (beast::iequals(f.name_string(), kTokenHeader)) continue;
    // Known fields in their canonical case ("Host"), as Go's proxy (E2B's)
    // passes them; others as sent.
    out += f.name() != http::field::unknown ? http::to_string(f.name()) : f.name_string();
    out += ": ";
    if (f.name() == http::field::host && !mask.empty()) {
      std::string m = mask;
      for (size_t at = m.find("${PORT}"); at != std::string::npos; at = m.find("${PORT}", at))
        m.replace(at, 7, std::to_string(port));
      out += m;
    } else if (f.name() == http::field::host && !authority.empty()) {
      out += authority;
    } else {
      out += f.value();
    }
    out += "\r\n";
  }
  out += "\r\n";
  return out;
}

bool Proxy::claims(std::string_view host) const {
  auto t = parseSandboxHost(host, domain_);
  return t && t->port != reserved_;
}

void Proxy::install(http::HttpServer& server) {
  server.routeHosts(
      [this](std::string_view host) { return claims(host); },
      [this, &server](beast::tcp_stream& s, beast::flat_buffer& b, http::HeadParser& h) {
        return serve(s, b, h, server.peerOf(s.socket()));
      });
}

bool Proxy::take(const std::string& id, const asio::ip::address& peer) {
  auto s = per_sandbox_.find(id);
  if (s != per_sandbox_.end() && s->second >= limits_.per_sandbox) return false;
  auto p = per_peer_.find({peer, id});
  if (p != per_peer_.end() && p->second >= limits_.per_peer) return false;
  ++per_sandbox_[id];
  ++per_peer_[{peer, id}];
  return true;
}

void Proxy::release(const std::string& id, const asio::ip::address& peer) {
  if (auto it = per_sandbox_.find(id); it != per_sandbox_.end() && --it->second == 0)
    per_sandbox_.erase(it);
  if (auto it = per_peer_.find({peer, id}); it != per_peer_.end() && --it->second == 0)
    per_peer_.erase(it);
}

namespace {

// What the proxy says itself about a sandbox's port.
http::Response refusalOf(const http::request_header<>& h, http::status st, const std::string& id,
                         std::string message, bool keep, std::optional<uint16_t> port = {}) {
  json::object o{{"message", std::move(message)}, {"sandboxId", id}};
  if (port) o["port"] = *port;
  o["code"] = static_cast<int>(st);
  return answer(h, st, std::move(o), keep);
}

}  // namespace

// One client connection, request after request. Over 80 lines because the
// steps of a request (its target and token checked, a guest connection
// opened or refused, the head and body relayed, an upgrade) share the
// connection's state and read best in their order.
asio::awaitable<void> Proxy::serve(beast::tcp_stream& client, beast::flat_buffer& buf,
                                   http::HeadParser& first, asio::ip::address peer) {
  std::shared_ptr<Relay> relay;
  std::optional<std::string> slot;  // the sandbox this connection counts against (take())
  std::optional<http::HeadParser> later;
  std::optional<http::Response> last_word;  // a refusal that ends the connection
  http::HeadParser* head = &first;
  for (;;) {
    const auto& h = head->get();
    auto authority = http::requestAuthority(h);
    std::optional<SandboxHost> target;
    if (authority.ok()) target = parseSandboxHost(*authority, domain_);
    // A later request for something else than a sandbox's port (the
    // listener's own routes, or two Hosts): this connection is not the place.
    if (!target || target->port == reserved_ || h.method() == http::verb::connect) {
      if (!authority.ok())
        last_word = answer(h, http::status::bad_request,
                           {{"message", authority.error().message()}, {"code", 400}}, false);
      break;
    }
    if (relay && relay->done) break;  // the guest closed: so did we
    const std::string& id = target->sandbox_id;
    if (relay && (relay->target != *target || !tokenOk(relay->route, h))) {
      // Never switched: the guest answers what it was sent, then this
      // request is refused and the connection ends.
      bool other = relay->target != *target;
      last_word = other ? refusalOf(h, http::status::misdirected_request, id,
                                    "This connection carries another sandbox port; open a new "
                                    "connection for this one",
                                    false)
                        : refusalOf(h, http::status::forbidden, id,
                                    "Missing or invalid e2b-traffic-access-token header", false);
      relay->switching = true;
      (void)co_await relay->port->closeWrite();
      bool drained = co_await waitDone(*relay, kDrain);
      if (!drained) last_word.reset();
      break;
    }
    if (!relay) {
      std::optional<http::Response> refusal;
      auto route = sandboxes_.route(id);
      if (route.ok() && route->paused && tokenOk(*route, h) && sandboxes_.wake) {
        Status woke = co_await sandboxes_.wake(id);
        if (woke.ok()) route = sandboxes_.route(id);
      }
      bool keep = h.keep_alive() && !hasBody(h);
      std::unique_ptr<agentclient::PortStream> port;
      const bool reachable = route.ok() && route->agent && !route->agent->failure();
      const bool admitted = reachable && tokenOk(*route, h);
      const bool taken = admitted && take(id, peer);
      if (!reachable) {
        refusal = refusalOf(h, http::status::bad_gateway, id, "The sandbox was not found", keep);
      } else if (!admitted) {
        refusal = refusalOf(h, http::status::forbidden, id,
                            "Missing or invalid e2b-traffic-access-token header", keep);
      } else if (!taken) {
        refusal = refusalOf(h, http::status::service_unavailable, id,
                            "Too many connections to the sandbox's ports; try again", false);
      } else {
        auto p = co_await route->agent->connectPort(target->port);
        // A server that is still starting (E2B's proxy waits for one too):
        // a refused port is tried again for a little while.
        for (auto until = std::chrono::steady_clock::now() + kRefusedRetry;
             !p.ok() && p.error().sysErrno() == ECONNREFUSED &&
             std::chrono::steady_clock::now() < until;) {
          asio::steady_timer pause(client.get_executor(), std::chrono::milliseconds(200));
          co_await pause.async_wait(kTok);
          p = co_await route->agent->connectPort(target->port);
        }
        if (!p.ok()) {
          bool refused = p.error().sysErrno() == ECONNREFUSED;
          std::string msg = refused ? "The sandbox is running but port " +
                                          std::to_string(target->port) + " is not open"
                                    : "Cannot reach port " + std::to_string(target->port) +
                                          " of the sandbox: " + p.error().message();
          refusal = refusalOf(h, http::status::bad_gateway, id, msg, keep, target->port);
          release(id, peer);
        } else {
          port = std::move(*p);
          // The sandbox's log (kind "port"): who connected, once it closes.
          port->logAs("ingress", peer.to_string(), target->port);
        }
      }
      if (refusal) {
        // Nothing of the request was read past its head: a body closes it.
        auto [ec, n] = co_await http::async_write(client, *refusal, kTok);
        if (ec || !refusal->keep_alive()) break;
        later.emplace();
        later->header_limit(kMaxHead);
        later->body_limit(boost::none);
        client.expires_after(limits_.idle);
        auto [rec, rn] = co_await http::async_read_header(client, buf, *later, kTok);
        client.expires_never();
        if (rec) break;
        head = &*later;
        continue;
      }
      relay = std::make_shared<Relay>(client.get_executor());
      relay->target = *target;
      relay->route = std::move(*route);
      relay->port = std::move(port);
      relay->done_event.expires_at(asio::steady_timer::time_point::max());
      slot = id;
      asio::co_spawn(client.get_executor(), pumpDown(relay, client), asio::detached);
    }
    // Told before the head goes: the answer may come before write() returns.
    const bool upgrade = http::wellFormedUpgrade(h);
    relay->responses.expect({h.method() == http::verb::head, upgrade});
    relay->last_active = std::chrono::steady_clock::now();
    if (!(co_await relay->port->write(serializeHead(h, relay->route.mask_host, target->port))).ok())
      break;
    if (!head->is_done()) {
      Watching body(relay, client, limits_, Relay::Phase::kBody);
      bool sent = co_await forwardBody(client, buf, *head, *relay->port, *relay);
      if (!sent) break;
    }
    if (upgrade) {
      // Only the guest's 101 turns the connection into bytes (WebSocket and
      // the like); any other answer leaves it HTTP.
      bool answered = co_await waitAnswered(*relay, std::chrono::hours(1));
      if (!answered) break;
      if (relay->responses.opaque()) {
        co_await rawUp(client, buf, *relay->port);
        co_await waitDone(*relay, std::chrono::hours(24));
        break;
      }
    }
    later.emplace();
    later->header_limit(kMaxHead);
    later->body_limit(boost::none);
    boost::system::error_code ec;
    {
      Watching idle(relay, client, limits_, Relay::Phase::kHead);
      auto [rec, n] = co_await http::async_read_header(client, buf, *later, kTok);
      ec = rec;
    }
    if (ec) {
      // The client sends no more: the guest hears it and finishes; its
      // close ends the client's side (pumpDown). An idle one is just cut.
      if (!relay->done && !relay->timed_out) {
        (void)co_await relay->port->closeWrite();
        co_await waitDone(*relay, std::chrono::hours(1));
      }
      break;
    }
    head = &*later;
  }
  boost::system::error_code ec;
  if (last_word && client.socket().is_open()) {
    client.expires_after(kDrain);
    co_await http::async_write(client, *last_word, kTok);
    client.expires_never();
  }
  if (relay) {
    relay->port->close();
    client.socket().close(ec);
    // The guest's answer to the cancel ends pumpDown; should it not come,
    // pumpDown must not touch this connection any more.
    co_await waitDone(*relay, kDrain);
    relay->abandoned = true;
    if (slot) release(*slot, peer);
  } else {
    client.socket().shutdown(tcp::socket::shutdown_send, ec);
  }
}

}  // namespace vessel::ingress
