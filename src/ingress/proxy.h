#pragma once
// Sandbox ports over HTTP: a request whose Host is
// `<port>-<sandbox id>.<domain>` goes to that port inside that sandbox,
// through its agent (agentclient::AgentClient::connectPort), never through
// the guest's network or the egress gateway. Installed on a listener with
// http::HttpServer::routeHosts; TLS on the same port is tls.h's.
//
// One guest connection per client connection. Requests are parsed (each
// head is checked: the same sandbox and port, the traffic token, the Host
// to show the sandbox), and so are responses (http/relay.h): each head
// bounded, each body framed, interim 1xx passed on, anything else cut. A
// request for another target waits until the guest has answered the
// earlier ones and closed, then opens a new guest connection; a 101 to a
// well-formed upgrade request (WebSocket) turns the rest of the connection
// into bytes both ways, an Upgrade header alone does not.
//
// Answers of its own, as E2B's proxy gives them: 502
// `{"message":"The sandbox was not found","sandboxId","code":502}` for a
// sandbox that is unknown or not running, 502 with a message when nothing
// listens on the port (after trying again for 2 s: a server may be
// starting), 403 without the traffic token a sandbox asks for.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <functional>
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
  // Non-empty: every request must carry it in e2b-traffic-access-token.
  std::string traffic_token;
  // Non-empty: the Host the sandbox sees, `${PORT}` replaced by the port.
  std::string mask_host;
  // The sandbox is paused (no agent): `Sandboxes::wake` may resume it, but
  // only for a request that carries the traffic token when one is needed,
  // so a stranger cannot resume a sandbox that keeps its ports private.
  bool paused = false;
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
  Proxy(std::string domain, Sandboxes sandboxes, uint16_t reserved_port = 0)
      : domain_(std::move(domain)), sandboxes_(std::move(sandboxes)), reserved_(reserved_port) {}

  bool claims(std::string_view host) const;
  // http::HostHandler.
  asio::awaitable<void> serve(boost::beast::tcp_stream& client, boost::beast::flat_buffer& buf,
                              http::HeadParser& head);
  // Installs claims() and serve() on `server`.
  void install(http::HttpServer& server);

  const std::string& domain() const { return domain_; }

 private:
  std::string domain_;
  Sandboxes sandboxes_;
  uint16_t reserved_;
};

// The head as the sandbox gets it: Host replaced by `mask` (with ${PORT}
// substituted) when set, the traffic token header dropped. Exposed for tests.
std::string serializeHead(const http::request_header<>& head, const std::string& mask,
                          uint16_t port);

}  // namespace vessel::ingress
