#pragma once
// Sandbox ports over HTTP: a request whose Host is
// `<port>-<sandbox id>.<domain>` goes to that port inside that sandbox,
// through its agent (agentclient::AgentClient::connectPort), never through
// the guest's network or the egress gateway. Installed on a listener with
// http::HttpServer::routeHosts; TLS on the same port is tls.h's.
//
// One guest connection per client connection, and one target: every head
// is checked before anything of it reaches the guest (its one Host, or
// its absolute-form authority, names the sandbox and port; the token the
// sandbox asks for, in e2b-traffic-access-token, which the guest never
// sees). Responses are parsed (http/relay.h): each head bounded, each
// body framed, interim 1xx passed on, anything else cut. A later request
// on the connection for another target, or without the token, is not
// switched to: the guest's answers to the earlier ones go down, then that
// request's refusal (421, 403) and the connection closes. A 101 to a
// well-formed upgrade request (WebSocket) turns the rest of the connection
// into bytes both ways, an Upgrade header alone does not.
//
// Bounded: a connection with nothing owed to it (no request waiting for
// the guest) and no bytes either way for ProxyLimits::idle is closed, so
// is one whose request body stops for body_idle; a sandbox takes at most
// per_sandbox relayed connections, per_peer of them from one peer address
// (so one client cannot take the agent's port streams from the others).
//
// Answers of its own, as E2B's proxy gives them: 502
// `{"message":"The sandbox was not found","sandboxId","code":502}` for a
// sandbox that is unknown or not running, 502 with a message when nothing
// listens on the port (after trying again for 2 s: a server may be
// starting), 403 without the token a sandbox asks for, 503 over a cap.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/result.h"
#include "http/server.h"
#include "ingress/host.h"

namespace vessel::agentclient {
class AgentClient;
}

namespace vessel::ingress {

namespace asio = boost::asio;

// Where a sandbox's port traffic goes and what it must carry.
struct Route {
  std::shared_ptr<agentclient::AgentClient> agent;
  // Non-empty: every request must carry it in e2b-traffic-access-token
  // (or a credential `accepts` takes). Empty with no `accepts`: public.
  std::string traffic_token;
  // Non-empty: the Host the sandbox sees, `${PORT}` replaced by the port.
  std::string mask_host;
  // The sandbox is paused (no agent): `Sandboxes::wake` may resume it, but
  // only for a request that carries the traffic token when one is needed,
  // so a stranger cannot resume a sandbox that keeps its ports private.
  bool paused = false;
  // Other credentials the token header may carry for this sandbox (a
  // data-plane session of its tenant); null: only the traffic token.
  std::function<bool(std::string_view token)> accepts;
};

struct ProxyLimits {
  std::chrono::seconds idle{60};       // nothing owed, no bytes either way
  std::chrono::seconds body_idle{30};  // a request body that stops coming
  // Relayed client connections to one sandbox (its agent takes 256 port
  // streams in all), and to one sandbox from one peer address.
  size_t per_sandbox = 192;
  size_t per_peer = 32;
};

struct Sandboxes {
  // The route to a running sandbox, or to a paused one (`paused`, no
  // agent); an Error when it is unknown or not running.
  std::function<Result<Route>(const std::string& id)> route;
  // Resumes a paused sandbox (auto-resume); null: a paused sandbox is not
  // running.
  std::function<asio::awaitable<Status>(const std::string& id)> wake;
};

class Proxy {
 public:
  // `domain`: the sandbox domain (host name, a port after it is ignored).
  // Hosts for `reserved_port` are not claimed (E2B's envd, 49983, is the
  // listener's own routes).
  Proxy(std::string domain, Sandboxes sandboxes, uint16_t reserved_port = 0,
        ProxyLimits limits = {})
      : domain_(std::move(domain)),
        sandboxes_(std::move(sandboxes)),
        reserved_(reserved_port),
        limits_(limits) {}

  bool claims(std::string_view host) const;
  // http::HostHandler, for a connection from `peer`.
  asio::awaitable<void> serve(boost::beast::tcp_stream& client, boost::beast::flat_buffer& buf,
                              http::HeadParser& head, asio::ip::address peer);
  // Installs claims() and serve() on `server`.
  void install(http::HttpServer& server);

  const std::string& domain() const { return domain_; }

 private:
  // A relayed connection counted against its sandbox's caps while it lives:
  // false when either cap is full.
  bool take(const std::string& id, const asio::ip::address& peer);
  void release(const std::string& id, const asio::ip::address& peer);

  std::string domain_;
  Sandboxes sandboxes_;
  uint16_t reserved_;
  ProxyLimits limits_;
  std::map<std::string, size_t> per_sandbox_;
  std::map<std::pair<asio::ip::address, std::string>, size_t> per_peer_;
};

// The head as the sandbox gets it: Host replaced by `mask` (with ${PORT}
// substituted) when set, an absolute-form target as its path with its
// authority as the Host, the traffic token header dropped. Exposed for tests.
std::string serializeHead(const http::request_header<>& head, const std::string& mask,
                          uint16_t port);

}  // namespace vessel::ingress
