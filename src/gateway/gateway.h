#pragma once
// vessel-gateway: the one egress path of every sandbox on a node. It accepts
// the TCP connections and DNS queries nftables hands it from sandbox network
// namespaces, tells sandboxes apart by the transit address a flow arrives
// from (set by the node, never by the guest), decides from what the guest
// sends (SNI, Host) under that sandbox's policy, resolves names itself and
// dials only its own answers. vesseld drives it over a unix control socket
// (docs/gateway.md). One io_context on one thread: the registry, resolver
// cache and CA are touched only there, so the data path takes no locks.
#include <array>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "gateway/classify.h"
#include "gateway/credentials/ca.h"
#include "gateway/decide.h"
#include "gateway/flow.h"
#include "gateway/policy/address_class.h"
#include "gateway/policy/decision.h"
#include "gateway/registry.h"
#include "gateway/resolver.h"

namespace vessel::gateway {

struct GatewayConfig {
  std::string listen_address = "0.0.0.0";
  uint16_t proxy_port = 15001;  // where nftables REDIRECTs sandbox TCP
  uint16_t dns_port = 15053;    // where sandbox DNS (UDP and TCP) is sent
  std::string control_socket = "/run/vessel/gateway.sock";
  std::string state_dir = "/var/lib/vessel/gateway";  // the CA lives here
  // Network namespace for everything upstream (resolver queries, dials): a
  // name under /run/netns or an absolute path. Empty: the gateway's own.
  std::string upstream_netns;
  std::string resolver = "127.0.0.1:53";  // trusted upstream resolver, IP[:PORT]
  std::string ca_bundle = "/etc/ssl/certs/ca-certificates.crt";
  std::vector<std::string> deny_cidrs;  // refused in addition to the built-in set
  std::chrono::milliseconds classify_timeout{5000};
  std::chrono::milliseconds full_mode_first_bytes{1000};
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds resolve_timeout{2000};
  size_t max_dns_inflight = 512;
  // Per sandbox, so one cannot take egress away from the others (the slot's
  // nftables rules bound the same things in the kernel, more loosely).
  size_t max_flows_per_sandbox = 1024;       // open TCP flows, classifying ones included
  double new_flows_per_second = 200;         // sustained; bursts of twice that
  size_t max_dns_inflight_per_sandbox = 32;  // of max_dns_inflight
  // A relayed connection with no byte either way for this long is reset.
  std::chrono::seconds relay_idle_timeout{600};
};

class Gateway {
 public:
  // Opens the listeners and control socket in the calling thread's network
  // namespace and loads or creates the CA. run() must then be called on the
  // same thread: it moves that thread into the upstream namespace.
  static Result<std::unique_ptr<Gateway>> create(GatewayConfig cfg);
  ~Gateway();

  Status run();  // returns after stop()
  void stop();   // callable from any thread

  uint16_t proxyPort() const { return proxy_port_; }
  uint16_t dnsPort() const { return dns_port_; }

 private:
  using tcp = boost::asio::ip::tcp;
  using udp = boost::asio::ip::udp;
  using unix_stream = boost::asio::local::stream_protocol;
  explicit Gateway(GatewayConfig cfg);

  // gateway.cc: accept loops and the control protocol.
  boost::asio::awaitable<void> acceptProxy();
  boost::asio::awaitable<void> acceptControl();
  boost::asio::awaitable<void> serveControl(unix_stream::socket s);
  std::string handleControl(std::string_view line);

  // proxy.cc: one guest TCP connection.
  boost::asio::awaitable<void> handleConn(tcp::socket guest);
  // The first bytes, read until FirstBytes has enough or `limit` passes;
  // nullopt if the guest closed or failed first.
  boost::asio::awaitable<std::optional<Classified>> classify(tcp::socket& guest,
                                                             std::chrono::milliseconds limit);
  // Carries out a dialling verdict; nullopt (after logging the deny) if
  // the name does not resolve to an outward address or the dial fails.
  boost::asio::awaitable<std::optional<tcp::socket>> dialFor(Flow& f, const Verdict& v,
                                                             tcp::endpoint original);
  // Registers the connection with `sb` (a policy change resets it), logs
  // the allow, and copies bytes by the verdict's tier, `first` first.
  boost::asio::awaitable<void> relay(Flow& f, Sandbox& sb, tcp::socket& guest, tcp::socket& up,
                                     std::string first, Verdict v,
                                     boost::asio::ip::address dialled);
  boost::asio::awaitable<std::optional<tcp::socket>> dial(Flow& f, const std::string& name);
  boost::asio::awaitable<std::optional<tcp::socket>> dialEndpoint(Flow& f, tcp::endpoint ep);
  using TimePoint = std::chrono::steady_clock::time_point;
  // last_active: the connection's idle clock (ConnHandle::last_active).
  boost::asio::awaitable<void> httpPlain(Flow& f, tcp::socket& guest, tcp::socket& up,
                                         std::string first, TimePoint* last_active);
  boost::asio::awaitable<void> splice(tcp::socket& a, tcp::socket& b, TimePoint* last_active);
  boost::asio::awaitable<void> pump(tcp::socket& from, tcp::socket& to, TimePoint* last_active);
  boost::asio::awaitable<void> terminate(Flow& f, tcp::socket& guest, tcp::socket& up,
                                         std::string hello, std::optional<policy::Credential> cred,
                                         TimePoint* last_active);
  void deny(const Flow& f, std::string_view reason);

  // dns_server.cc
  boost::asio::awaitable<void> serveDnsUdp();
  boost::asio::awaitable<void> acceptDnsTcp();
  boost::asio::awaitable<void> serveDnsTcp(tcp::socket s);
  boost::asio::awaitable<std::optional<std::string>> answerDns(std::string query,
                                                               boost::asio::ip::address source);

  GatewayConfig cfg_;
  boost::asio::io_context io_;
  Registry registry_;
  policy::AddressClassifier classifier_;
  std::optional<Resolver> resolver_;
  std::optional<credentials::CertificateAuthority> ca_;
  std::optional<boost::asio::ssl::context> upstream_tls_;
  std::optional<tcp::acceptor> proxy_acceptor_;
  std::optional<tcp::acceptor> dns_tcp_acceptor_;
  std::optional<udp::socket> dns_udp_;
  std::optional<unix_stream::acceptor> control_acceptor_;
  uint16_t proxy_port_ = 0;
  uint16_t dns_port_ = 0;
  size_t dns_inflight_ = 0;
  // Per-sandbox budgets (by sandbox id), see GatewayConfig.
  struct Budget {
    size_t flows = 0;
    size_t dns = 0;
    double tokens = -1;  // new-flow bucket; < 0: not started
    std::chrono::steady_clock::time_point refilled;
  };
  std::map<std::string, Budget> budgets_;
  // Takes a new flow from the sandbox's budget; "" or the refusal reason.
  std::string admitFlow(const std::string& sandbox);
  boost::asio::awaitable<void> sweepIdle();
  // The classifier's host addresses: both listen sides and the upstream
  // namespace's current addresses.
  void refreshHostAddresses();
  // Re-reads them on every netlink address event of the upstream namespace.
  Status watchAddresses();
  std::vector<boost::asio::ip::address> listen_addresses_;
  // Shared relay buffer: a splice reads into it only when the socket is
  // readable and writes it out at once, so idle connections hold no buffer.
  std::array<char, 64 * 1024> relay_buf_;
  Logger log_{"gateway"};
};

}  // namespace vessel::gateway
