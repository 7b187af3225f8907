#include "gateway/gateway.h"

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>

#include "base/fd.h"
#include "os/interfaces.h"

namespace vessel::gateway {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr auto kTok = asio::as_tuple(asio::use_awaitable);
constexpr size_t kMaxControlLine = 1 << 20;

Result<asio::ip::udp::endpoint> parseHostPort(const std::string& s, uint16_t default_port) {
  std::string host = s;
  uint16_t port = default_port;
  size_t colon = s.rfind(':');
  if (colon != std::string::npos && s.find(':') == colon) {
    host = s.substr(0, colon);
    std::string p = s.substr(colon + 1);
    if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(p) == 0 || std::stoi(p) > 65535) {
      return Error(Code::kInvalidArgument, "bad port in " + s);
    }
    port = static_cast<uint16_t>(std::stoi(p));
  }
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) return Error(Code::kInvalidArgument, "bad address " + s);
  return asio::ip::udp::endpoint(addr, port);
}

std::vector<asio::ip::address> localAddresses() {
  std::vector<asio::ip::address> out;
  for (const os::InterfaceAddress& a : os::interfaceAddresses()) {
    if (a.v6) {
      asio::ip::address_v6::bytes_type b;
      std::memcpy(b.data(), a.bytes.data(), 16);
      out.push_back(asio::ip::address_v6(b));
    } else {
      out.push_back(asio::ip::address_v4({a.bytes[0], a.bytes[1], a.bytes[2], a.bytes[3]}));
    }
  }
  return out;
}

std::string reply(const Status& s, json::object extra = {}) {
  if (s.ok()) {
    extra["ok"] = true;
    return json::serialize(extra) + "\n";
  }
  json::object o{{"ok", false},
                 {"code", std::string(codeName(s.error().code()))},
                 {"error", s.error().message()}};
  return json::serialize(o) + "\n";
}

}  // namespace

Gateway::Gateway(GatewayConfig cfg) : cfg_(std::move(cfg)) {}

Gateway::~Gateway() {
  if (control_acceptor_) ::unlink(cfg_.control_socket.c_str());
}

Result<std::unique_ptr<Gateway>> Gateway::create(GatewayConfig cfg) {
  std::unique_ptr<Gateway> g(new Gateway(std::move(cfg)));
  const GatewayConfig& c = g->cfg_;
  for (const std::string& d : c.deny_cidrs) {
    VESSEL_ASSIGN_OR_RETURN(auto cidr, policy::parseCidr(d));
    g->classifier_.addDenied(cidr);
  }
  VESSEL_ASSIGN_OR_RETURN(auto resolver_ep, parseHostPort(c.resolver, 53));
  g->resolver_.emplace(g->io_, resolver_ep, c.resolve_timeout);
  VESSEL_ASSIGN_OR_RETURN(auto ca, credentials::CertificateAuthority::loadOrCreate(c.state_dir));
  g->ca_.emplace(std::move(ca));

  g->upstream_tls_.emplace(asio::ssl::context::tls_client);
  SSL_CTX* up = g->upstream_tls_->native_handle();
  SSL_CTX_set_min_proto_version(up, TLS1_2_VERSION);
  SSL_CTX_set_verify(up, SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_load_verify_locations(up, c.ca_bundle.c_str(), nullptr) != 1) {
    return Error(Code::kInvalidArgument,
                 credentials::opensslError("load egress CA bundle " + c.ca_bundle));
  }
  static const unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(up, kAlpn, sizeof kAlpn);

  boost::system::error_code ec;
  auto listen_addr = asio::ip::make_address(c.listen_address, ec);
  if (ec) return Error(Code::kInvalidArgument, "bad listen address " + c.listen_address);
  auto open_tcp = [&](uint16_t port, const char* what) -> Result<tcp::acceptor> {
    tcp::acceptor a(g->io_);
    tcp::endpoint ep(listen_addr, port);
    a.open(ep.protocol(), ec);
    if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) a.bind(ep, ec);
    if (!ec) a.listen(4096, ec);
    if (ec) return Error(Code::kUnavailable, std::string("listen ") + what + ": " + ec.message());
    return a;
  };
  VESSEL_ASSIGN_OR_RETURN(auto proxy, open_tcp(c.proxy_port, "proxy"));
  g->proxy_port_ = proxy.local_endpoint().port();
  g->proxy_acceptor_.emplace(std::move(proxy));
  VESSEL_ASSIGN_OR_RETURN(auto dns_tcp, open_tcp(c.dns_port, "dns tcp"));
  g->dns_port_ = dns_tcp.local_endpoint().port();
  g->dns_tcp_acceptor_.emplace(std::move(dns_tcp));
  udp::socket dns_udp(g->io_);
  dns_udp.open(listen_addr.is_v4() ? udp::v4() : udp::v6(), ec);
  if (!ec) dns_udp.bind(udp::endpoint(listen_addr, g->dns_port_), ec);
  if (ec) return Error(Code::kUnavailable, "listen dns udp: " + ec.message());
  g->dns_udp_.emplace(std::move(dns_udp));

  ::unlink(c.control_socket.c_str());
  unix_stream::acceptor ctl(g->io_);
  ctl.open(unix_stream(), ec);
  mode_t old = ::umask(077);  // the socket is root's: it grants any policy
  if (!ec) ctl.bind(unix_stream::endpoint(c.control_socket), ec);
  ::umask(old);
  if (!ec) ctl.listen(64, ec);
  if (ec)
    return Error(Code::kUnavailable, "control socket " + c.control_socket + ": " + ec.message());
  g->control_acceptor_.emplace(std::move(ctl));
  g->listen_addresses_ = localAddresses();
  return g;
}

Status Gateway::run() {
  if (!cfg_.upstream_netns.empty()) {
    std::string path = cfg_.upstream_netns.front() == '/' ? cfg_.upstream_netns
                                                          : "/run/netns/" + cfg_.upstream_netns;
    VESSEL_ASSIGN_OR_RETURN(Fd ns, Fd::open(path, O_RDONLY | O_CLOEXEC));
    // Only this thread moves: sockets created from here on (resolver queries,
    // upstream dials) live upstream; the listeners stay where they were made.
    if (::setns(ns.get(), CLONE_NEWNET) != 0) return Error::fromErrno("setns " + path);
  }
  // The gateway's own addresses on both sides are never a destination; the
  // upstream side's are re-read whenever they change (a DHCP renewal, an
  // address added to the host), so a new one is never reachable.
  refreshHostAddresses();
  if (auto w = watchAddresses(); !w.ok())
    log_.warn("host addresses are read only at start: {}", w.error().message());

  asio::co_spawn(io_, acceptProxy(), asio::detached);
  asio::co_spawn(io_, serveDnsUdp(), asio::detached);
  asio::co_spawn(io_, acceptDnsTcp(), asio::detached);
  asio::co_spawn(io_, acceptControl(), asio::detached);
  asio::co_spawn(io_, sweepIdle(), asio::detached);
  log_.info("listening proxy :{} dns :{} control {} upstream netns {} resolver {}", proxy_port_,
            dns_port_, cfg_.control_socket,
            cfg_.upstream_netns.empty() ? "(own)" : cfg_.upstream_netns, cfg_.resolver);
  io_.run();
  return okStatus();
}

void Gateway::stop() { io_.stop(); }

std::string Gateway::admitFlow(const std::string& id) {
  Budget& b = budgets_[id];
  if (b.flows >= cfg_.max_flows_per_sandbox) return "overloaded:flows";
  auto now = std::chrono::steady_clock::now();
  double burst = 2 * cfg_.new_flows_per_second;
  if (b.tokens < 0) {
    b.tokens = burst;
    b.refilled = now;
  }
  double elapsed = std::chrono::duration<double>(now - b.refilled).count();
  b.tokens = std::min(burst, b.tokens + elapsed * cfg_.new_flows_per_second);
  b.refilled = now;
  if (b.tokens < 1) return "overloaded:rate";
  b.tokens -= 1;
  ++b.flows;
  return "";
}

void Gateway::refreshHostAddresses() {
  std::vector<asio::ip::address> host = listen_addresses_;
  for (const auto& a : localAddresses()) host.push_back(a);
  classifier_.setHostAddresses(std::move(host));
}

Status Gateway::watchAddresses() {
  // Opened on this thread, after setns: the upstream namespace's events.
  Fd nl(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE));
  if (!nl.valid()) return Error::fromErrno("netlink socket");
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
  // SAFETY: sockaddr_nl is a sockaddr for bind().
  if (::bind(nl.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return Error::fromErrno("netlink bind");
  auto sd = std::make_shared<asio::posix::stream_descriptor>(io_, nl.release());
  asio::co_spawn(
      io_,
      [this, sd]() -> asio::awaitable<void> {
        std::array<char, 8192> buf;
        for (;;) {
          auto [ec] = co_await sd->async_wait(asio::posix::descriptor_base::wait_read,
                                              asio::as_tuple(asio::use_awaitable));
          if (ec) co_return;
          // The messages only say that something changed; the whole set is
          // read again (an overflow, ENOBUFS, means the same).
          while (::recv(sd->native_handle(), buf.data(), buf.size(), MSG_DONTWAIT) > 0 ||
                 errno == ENOBUFS) {
          }
          refreshHostAddresses();
          log_.info("host addresses changed; refused destinations updated");
        }
      },
      asio::detached);
  return okStatus();
}

asio::awaitable<void> Gateway::sweepIdle() {
  auto every = std::max<std::chrono::steady_clock::duration>(
      std::chrono::seconds(1), std::min<std::chrono::steady_clock::duration>(
                                   std::chrono::seconds(30), cfg_.relay_idle_timeout / 4));
  asio::steady_timer t(io_);
  for (;;) {
    t.expires_after(every);
    auto [ec] = co_await t.async_wait(kTok);
    if (ec) co_return;
    registry_.resetIdle(std::chrono::steady_clock::now() - cfg_.relay_idle_timeout);
    // Budgets of sandboxes that are gone and idle.
    for (auto it = budgets_.begin(); it != budgets_.end();) {
      bool idle = it->second.flows == 0 && it->second.dns == 0;
      it = idle && !registry_.byId(it->first) ? budgets_.erase(it) : std::next(it);
    }
  }
}

asio::awaitable<void> Gateway::acceptProxy() {
  for (;;) {
    auto [ec, s] = co_await proxy_acceptor_->async_accept(kTok);
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      // EMFILE and friends: keep serving the connections we have.
      log_.warn("proxy accept: {}", ec.message());
      asio::steady_timer t(io_, std::chrono::milliseconds(50));
      co_await t.async_wait(kTok);
      continue;
    }
    asio::co_spawn(io_, handleConn(std::move(s)), asio::detached);
  }
}

asio::awaitable<void> Gateway::acceptControl() {
  for (;;) {
    auto [ec, s] = co_await control_acceptor_->async_accept(kTok);
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      continue;
    }
    asio::co_spawn(io_, serveControl(std::move(s)), asio::detached);
  }
}

asio::awaitable<void> Gateway::serveControl(unix_stream::socket s) {
  asio::streambuf buf(kMaxControlLine);
  for (;;) {
    auto [ec, n] = co_await asio::async_read_until(s, buf, '\n', kTok);
    if (ec) co_return;
    std::string line(asio::buffers_begin(buf.data()), asio::buffers_begin(buf.data()) + n);
    buf.consume(n);
    std::string out = handleControl(line);
    auto [wec, wn] = co_await asio::async_write(s, asio::buffer(out), kTok);
    if (wec) co_return;
  }
}

std::string Gateway::handleControl(std::string_view line) {
  boost::system::error_code ec;
  json::value v = json::parse(line, ec);
  if (ec || !v.is_object()) return reply(Error(Code::kInvalidArgument, "control: not JSON"));
  const json::object& o = v.as_object();
  auto str = [&](const char* k) -> std::string {
    auto* x = o.if_contains(k);
    return x && x->is_string() ? std::string(x->as_string()) : std::string();
  };
  std::string op = str("op");
  if (op == "ping") return reply(okStatus());
  if (op == "set_sandbox") {
    std::string id = str("sandbox");
    auto src = asio::ip::make_address(str("source"), ec);
    if (id.empty() || ec) {
      return reply(Error(Code::kInvalidArgument, "set_sandbox needs sandbox and source"));
    }
    auto* pv = o.if_contains("policy");
    if (!pv) return reply(Error(Code::kInvalidArgument, "set_sandbox needs policy"));
    auto p = policy::Policy::fromJson(*pv);
    if (!p.ok()) return reply(p.error());
    uint64_t gen = p->generation;
    Status s = registry_.setSandbox(id, src, std::move(*p));
    return reply(s, {{"generation", gen}});
  }
  if (op == "remove_sandbox") return reply(registry_.removeSandbox(str("sandbox")));
  if (op == "stats") {
    json::object counters;
    for (const auto& [k, n] : registry_.counters()) counters[k] = n;
    return reply(okStatus(),
                 {{"counters", counters}, {"connections", registry_.liveConnections()}});
  }
  if (op == "ca_certificate") return reply(okStatus(), {{"pem", ca_->certificatePem()}});
  if (op == "decisions") {
    // vesseld's read for the sandboxes' logs: those after `after`, bounded.
    auto* a = o.if_contains("after");
    uint64_t after = 0;
    if (a && a->is_uint64()) after = a->as_uint64();
    if (a && a->is_int64() && a->as_int64() > 0) after = static_cast<uint64_t>(a->as_int64());
    json::array out;
    for (const auto& d : registry_.decisionsAfter(after, 1000))
      out.push_back(json::object{{"seq", d.seq},
                                 {"at_ms", d.at_ms},
                                 {"kind", d.kind},
                                 {"sandbox", d.sandbox},
                                 {"name", d.name},
                                 {"address", d.address},
                                 {"port", d.port},
                                 {"verdict", d.allowed ? "allow" : "deny"},
                                 {"reason", d.reason}});
    return reply(okStatus(), {{"decisions", std::move(out)}, {"last", registry_.lastDecision()}});
  }
  return reply(Error(Code::kInvalidArgument, "control: unknown op \"" + op.substr(0, 32) + "\""));
}

}  // namespace vessel::gateway
